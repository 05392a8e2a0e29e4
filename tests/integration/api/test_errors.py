"""Bad input is answered with {"error": {"code", "message"}} and the right status, and
leaves nothing half-written."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph


@pytest.fixture
def backed_up(stack: Stack, volumes_pool: rados.Ioctx) -> Iterator[dict[str, str]]:
    """A volume with one available restore point."""
    name = ceph.unique_name("err")
    rbd.RBD().create(volumes_pool, name, 8 * MiB)
    with rbd.Image(volumes_pool, name) as image:
        image.write(b"\x05" * (2 * MiB), 0)
    job = stack.wait_job(stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{name}"})
                         .json()["id"])
    assert job["status"] == "succeeded", job
    yield {"image": name, "rp": job["restore_point_id"]}
    ceph.remove_image(volumes_pool, name)


def error_of(response: object, status: int) -> dict[str, str]:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"}
    assert body["error"]["code"]
    assert body["error"]["message"]
    return body["error"]  # type: ignore[no-any-return]


def test_unknown_volume_is_404_naming_it(stack: Stack) -> None:
    err = error_of(stack.post("/v1/backups", {"volume": "ceph-a/volumes/no-such-volume"}), 404)
    assert err["code"] == "volume_not_found"
    assert "ceph-a/volumes/no-such-volume" in err["message"]


def test_malformed_body_is_422_naming_the_field(stack: Stack) -> None:
    err = error_of(stack.post("/v1/backups", {"target": "local"}), 422)
    assert "volume" in err["message"]
    err = error_of(stack.post("/v1/backups", {"volume": 42}), 422)
    assert "volume" in err["message"]
    err = error_of(stack.post("/v1/backups", {"volume": "x", "qos_bytes_per_second": -1}), 422)
    assert "qos_bytes_per_second" in err["message"]
    response = stack.client.post("/v1/backups", content=b"{not json",
                                 headers={"X-Project-Id": "p", "Content-Type": "application/json"})
    assert "JSON" in error_of(response, 422)["message"]


def test_badly_shaped_volume_name_is_422(stack: Stack) -> None:
    err = error_of(stack.post("/v1/backups", {"volume": "just-an-image"}), 422)
    assert "cluster/pool/image" in err["message"]
    err = error_of(stack.post("/v1/backups", {"volume": "ceph-z/volumes/x"}), 422)
    assert err["code"] == "unknown_cluster"


def test_unknown_target_is_422(stack: Stack, backed_up: dict[str, str]) -> None:
    err = error_of(stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{backed_up['image']}",
                                              "target": "nowhere"}), 422)
    assert err["code"] == "unknown_target"
    assert "nowhere" in err["message"]
    assert "local" in err["message"]


def test_missing_project_header_is_401(stack: Stack) -> None:
    assert error_of(stack.client.get("/v1/restore-points"), 401)["code"] == "unauthorized"


def test_restore_onto_existing_image_is_409(stack: Stack, backed_up: dict[str, str],
                                            volumes_pool: rados.Ioctx) -> None:
    before = ceph.sha256_of(volumes_pool, backed_up["image"])
    err = error_of(stack.post(f"/v1/restore-points/{backed_up['rp']}/restore",
                              {"target": backed_up["image"]}), 409)
    assert err["code"] == "image_exists"
    assert ceph.sha256_of(volumes_pool, backed_up["image"]) == before


# A repository query's project scope: on each database.
@pytest.mark.both_databases
def test_another_projects_restore_point_is_404(stack: Stack, backed_up: dict[str, str]) -> None:
    other = {"X-Project-Id": "project-b", "X-Roles": "member"}
    rp = backed_up["rp"]
    # Every route on one restore point: each loads it on its own path.
    for answer in (
            stack.get(f"/v1/restore-points/{rp}", headers=other),
            stack.client.patch(f"/v1/restore-points/{rp}", headers=other,
                               json={"locked_until": "2099-01-01T00:00:00+00:00"}),
            stack.post(f"/v1/restore-points/{rp}/restore", {"target": "x"}, headers=other),
            stack.post(f"/v1/restore-points/{rp}/verify", {}, headers=other),
            stack.post(f"/v1/restore-points/{rp}/copy", {"target": "s3"}, headers=other),
            stack.delete(f"/v1/restore-points/{rp}", headers=other)):
        assert error_of(answer, 404)["code"] == "restore_point_not_found", \
            answer.request.method + " " + answer.request.url.path
    # Still there for its owner, unchanged: not locked, no job of another project's on it.
    mine = stack.get(f"/v1/restore-points/{rp}").json()
    assert mine["status"] == "available"
    assert mine["locked_until"] is None


def test_unknown_ids_are_404_and_malformed_ones_422(stack: Stack) -> None:
    unknown = str(uuid.uuid4())
    assert error_of(stack.get(f"/v1/jobs/{unknown}"), 404)["code"] == "job_not_found"
    assert error_of(stack.get(f"/v1/restore-points/{unknown}"), 404)["code"] \
        == "restore_point_not_found"
    assert error_of(stack.get("/v1/restore-points", marker=unknown), 400)["code"] \
        == "invalid_marker"
    # Malformed ids never reach the database (a NUL byte made PostgreSQL answer 500).
    for bad in ("nope", "%00", unknown + "%00", "x" * 5000):
        err = error_of(stack.get(f"/v1/jobs/{bad}"), 422)
        assert "job_id" in err["message"]
        assert "UUID" in err["message"]
    err = error_of(stack.get("/v1/restore-points", marker="a\x00b"), 422)
    assert "marker" in err["message"]


# A guarded update refuses the delete: on each database.
@pytest.mark.both_databases
def test_delete_while_restoring_is_409(stack: Stack, backed_up: dict[str, str],
                                       volumes_pool: rados.Ioctx) -> None:
    target = ceph.unique_name("slow-restore")
    # A slow restore (QoS 1 MiB/s over 2 MiB of data) is still running when the delete comes.
    job = stack.post(f"/v1/restore-points/{backed_up['rp']}/restore",
                     {"target": target, "qos_bytes_per_second": MiB}).json()
    try:
        err = error_of(stack.delete(f"/v1/restore-points/{backed_up['rp']}"), 409)
        assert err["code"] == "restore_point_busy"
        assert job["id"] in err["message"]
        assert stack.wait_job(job["id"])["status"] == "succeeded"
        assert stack.get(f"/v1/restore-points/{backed_up['rp']}").json()["status"] == "available"
    finally:
        ceph.remove_image(volumes_pool, target)


# The volume's lock is a unique row (and an active backup a partial unique index).
@pytest.mark.both_databases
def test_second_backup_of_a_busy_volume_is_409(stack: Stack, backed_up: dict[str, str]) -> None:
    volume = f"ceph-a/volumes/{backed_up['image']}"
    first = stack.post("/v1/backups", {"volume": volume, "qos_bytes_per_second": MiB})
    assert first.status_code == 202
    err = error_of(stack.post("/v1/backups", {"volume": volume}), 409)
    assert err["code"] == "backup_already_running"
    assert stack.wait_job(first.json()["id"])["status"] == "succeeded"


def test_openapi_lists_error_responses(stack: Stack) -> None:
    spec = stack.client.get("/openapi.json").json()
    post_backup = spec["paths"]["/v1/backups"]["post"]["responses"]
    assert {"202", "404", "409", "422"} <= set(post_backup)
    assert post_backup["404"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "ErrorResponse")
    restore = spec["paths"]["/v1/restore-points/{restore_point_id}/restore"]["post"]["responses"]
    assert {"404", "409", "422"} <= set(restore)
    delete = spec["paths"]["/v1/restore-points/{restore_point_id}"]["delete"]["responses"]
    assert {"202", "404", "409"} <= set(delete)
