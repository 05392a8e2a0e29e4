"""Project quotas on the real stack, with limits of a few MiB: the storage limit is hard for
backups and off-site copies alike (refused up front when the room they need is known,
stopped while running once the project is over, and nothing kept: no restore point, no
backup image, no manifest), two backups racing for the last room never both stay, copies
count against the restore point quota, and deleting the full under an incremental frees
nothing the backup image still holds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import rados
import rbd

from services.storage.object_layout import manifest_key
from services.storage.s3 import Bucket
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack

pytestmark = [pytest.mark.ceph, pytest.mark.both_databases]

GIB = 1 << 30
ADMIN = {"X-Project-Id": "cloud-admin", "X-Roles": "admin"}


def member_of(project: str) -> dict[str, str]:
    return {"X-Project-Id": project, "X-Roles": "member"}


def set_quota(stack: Stack, project: str, *, mib: float | None = None,
              restore_points: int | None = None) -> None:
    answer = stack.client.put(f"/v1/quotas/{project}", headers=ADMIN, json={
        "gigabytes": None if mib is None else mib * MiB / GIB,
        "restore_points": restore_points})
    assert answer.status_code == 200, answer.text


def stored(stack: Stack, project: str) -> int:
    usage = stack.get("/v1/usage", member_of(project)).json()["usage"]
    return int(usage["bytes_stored"])


def gib_stored(stack: Stack, project: str) -> float:
    return float(stack.get("/v1/usage", member_of(project)).json()["usage"]["gigabytes_stored"])


def post_backup(stack: Stack, project: str, image: str, **extra: object) -> Any:
    return stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{image}", "kind": "full",
                                      **extra}, member_of(project))


def finished(stack: Stack, project: str, answer: Any) -> dict[str, Any]:
    assert answer.status_code == 202, answer.text
    job: dict[str, Any] = stack.wait_job(answer.json()["id"], headers=member_of(project))
    return job


def restore_points(stack: Stack, project: str) -> list[dict[str, Any]]:
    page = stack.get("/v1/restore-points", member_of(project), limit=100).json()
    return list(page["restore_points"])


def refused_for_quota(answer: Any) -> str:
    assert answer.status_code == 413, answer.text
    error = answer.json()["error"]
    assert error["code"] == "quota_exceeded", error
    return str(error["message"])


def failed_for_quota(job: dict[str, Any]) -> str:
    assert job["status"] == "failed", job
    assert job["error"]["code"] == "quota_exceeded", job
    return str(job["error"]["message"])


def backup_images_of(pool: rados.Ioctx, image: str) -> list[str]:
    """The backup images Cairn made for `image` (their metadata names the volume); other
    tests and sessions share the pool."""
    found = []
    for name in rbd.RBD().list(pool):
        if not name.startswith("cairn.vol."):
            continue
        try:
            with rbd.Image(pool, name, read_only=True) as backup:
                if backup.metadata_get("cairn.volume") == f"ceph-a/volumes/{image}":
                    found.append(name)
        except (rbd.ImageNotFound, KeyError):
            continue  # removed meanwhile, or not Cairn's
    return found


@pytest.fixture
def project(backups_pool: rados.Ioctx) -> Iterator[str]:
    name = ceph.unique_name("quota")
    yield name
    ceph.remove_backups_of_project(backups_pool, name)


@pytest.fixture
def bucket(stack: Stack) -> Iterator[Bucket]:
    if "s3" not in stack.settings.object_targets:
        pytest.fail("the local RGW is not running: start the stack with CAIRN_RGW=1")
    opened = Bucket(stack.settings.object_targets["s3"])
    yield opened
    opened.close()


def test_backups_past_the_storage_quota_are_refused_or_stopped_and_leave_nothing(
        stack: Stack, project: str, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        images: list[str]) -> None:
    small = ceph.random_image(volumes_pool, "quota-small", 4 * MiB, seed=301)
    large = ceph.random_image(volumes_pool, "quota-large", 12 * MiB, seed=302)
    images += [small, large]
    set_quota(stack, project, mib=6)
    assert finished(stack, project, post_backup(stack, project, small))["status"] == "succeeded"
    assert stored(stack, project) == 4 * MiB
    before = restore_points(stack, project)

    # Known before it starts: another full of the volume takes what its last full took.
    message = refused_for_quota(post_backup(stack, project, small))
    assert (f"storage quota of project {project!r} exceeded: 4.0 MiB of 6.0 MiB stored, "
            "this needs about 4.0 MiB more (2.0 MiB over)") in message, message

    # A first backup tells its size only as it writes: it stops once the project is over
    # its limit (well before its 12 MiB), and what it wrote is removed.
    job = finished(stack, project, post_backup(stack, project, large,
                                               qos_bytes_per_second=4 * MiB))
    message = failed_for_quota(job)
    assert f"storage quota of project {project!r} exceeded" in message, message
    assert job["progress"]["bytes_done"] < 12 * MiB, job["progress"]
    assert stack.get(f"/v1/restore-points/{job['restore_point_id']}",
                     member_of(project)).status_code == 404
    assert restore_points(stack, project) == before
    assert backup_images_of(backups_pool, large) == []
    assert not [s for s in ceph.snapshots(volumes_pool, large) if s.startswith("cairn.")]
    assert stored(stack, project) == 4 * MiB

    # Within the limit, backups run as ever.
    set_quota(stack, project, mib=16)
    job = finished(stack, project, post_backup(stack, project, large))
    assert job["status"] == "succeeded", job
    assert stored(stack, project) == 16 * MiB


def test_two_backups_racing_for_the_last_room_never_both_stay(
        stack: Stack, project: str, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    # Neither size is known up front (first backups): both start, both write 4 MiB, and
    # whichever checks last sees the other's bytes.
    first = ceph.random_image(volumes_pool, "quota-race", 4 * MiB, seed=311)
    second = ceph.random_image(volumes_pool, "quota-race", 4 * MiB, seed=312)
    images += [first, second]
    set_quota(stack, project, mib=6)
    answers = [post_backup(stack, project, image) for image in (first, second)]
    jobs = [finished(stack, project, answer) for answer in answers]
    assert sorted(job["status"] for job in jobs) == ["failed", "succeeded"], jobs
    failed_for_quota(next(job for job in jobs if job["status"] == "failed"))
    assert stored(stack, project) == 4 * MiB
    assert len(restore_points(stack, project)) == 1


def test_copies_count_against_both_quotas(
        stack: Stack, project: str, volumes_pool: rados.Ioctx, images: list[str],
        bucket: Bucket) -> None:
    source = ceph.random_image(volumes_pool, "quota-copy", 4 * MiB, seed=321)
    images.append(source)
    local = finished(stack, project, post_backup(stack, project, source))["restore_point_id"]

    def copy() -> Any:
        return stack.post(f"/v1/restore-points/{local}/copy", {"target": "s3"},
                          member_of(project))

    # A copy is a restore point of its own.
    set_quota(stack, project, restore_points=1)
    message = refused_for_quota(copy())
    assert "restore point quota" in message
    assert "1 of 1 used, this needs 1 more (1 over)" in message, message
    assert [rp["id"] for rp in restore_points(stack, project)] == [local]

    # And its data counts as a backup's does: 4 MiB more do not fit in 6.
    set_quota(stack, project, mib=6)
    job = finished(stack, project, copy())
    failed_for_quota(job)
    assert stack.get(f"/v1/restore-points/{job['restore_point_id']}",
                     member_of(project)).status_code == 404
    assert bucket.size(manifest_key(project, job["restore_point_id"])) is None
    assert [rp["id"] for rp in restore_points(stack, project)] == [local]
    assert stored(stack, project) == 4 * MiB

    # Within the limit it is made, and counted.
    set_quota(stack, project, mib=8)
    job = finished(stack, project, copy())
    assert job["status"] == "succeeded", job
    assert stored(stack, project) == 8 * MiB
    # The project is full now: the next backup of the volume is refused up front.
    refused_for_quota(post_backup(stack, project, source))


def test_deleting_the_full_under_an_incremental_frees_only_what_the_target_frees(
        stack: Stack, project: str, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    source = ceph.random_image(volumes_pool, "quota-chain", 8 * MiB, seed=331)
    images.append(source)
    full = finished(stack, project, post_backup(stack, project, source))["restore_point_id"]
    with rbd.Image(volumes_pool, source) as image:
        image.write(ceph._Random(332).bytes(MiB), 0)
    job = finished(stack, project, post_backup(stack, project, source, kind="incremental"))
    assert job["status"] == "succeeded", job
    incremental = job["restore_point_id"]
    added = stack.get(f"/v1/restore-points/{incremental}", member_of(project)).json()[
        "bytes_copied"]
    assert 0 < added < 8 * MiB
    assert gib_stored(stack, project) == pytest.approx((8 * MiB + added) / GIB, abs=1e-3)
    assert stored(stack, project) == 8 * MiB + added

    deleted = stack.delete(f"/v1/restore-points/{full}", member_of(project))
    assert deleted.status_code == 202, deleted.text
    assert stack.wait_job(deleted.json()["id"], headers=member_of(project))["status"] == (
        "succeeded")
    # The backup image still holds the whole volume for the incremental: 8 MiB, not the
    # incremental's own change.
    assert gib_stored(stack, project) == pytest.approx(8 * MiB / GIB, abs=1e-3)
    assert stored(stack, project) == 8 * MiB


def test_a_limit_reads_back_as_it_was_set(stack: Stack, project: str) -> None:
    # 10, not 10.0; 0.1, not 0.09999999962747097 (what 0.1 GiB in bytes is in GiB).
    for asked in (10, 0.1, 0.5):
        answer = stack.client.put(f"/v1/quotas/{project}", headers=ADMIN,
                                  json={"gigabytes": asked, "restore_points": None})
        assert answer.status_code == 200, answer.text
        assert f'"gigabytes":{asked}}}' in answer.text.replace(" ", ""), answer.text
        again = stack.client.get(f"/v1/quotas/{project}", headers=ADMIN)
        assert again.json()["limits"]["gigabytes"] == asked
        assert type(again.json()["limits"]["gigabytes"]) is type(asked)
