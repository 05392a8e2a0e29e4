"""Acceptance on real Keystone, Cinder and Ceph: a member of project A protects a Cinder
volume and restores it into a new Cinder volume, byte for byte; a restore in place is
refused on an attached volume and works on a detached one."""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from typing import Any

import rbd

from services.errors import VolumeNotFound
from tests.integration.openstack.conftest import Protected
from tests.support import ceph
from tests.support.openstack import (
    Cloud,
    OpenStackCairn,
    User,
    attach,
    cinder_volume,
    delete_volume,
    image_of,
)


def test_volume_list_shows_protection(cloud: Cloud, os_cairn: OpenStackCairn,
                                      protected: Protected) -> None:
    token = cloud["a-member"].token()
    with cinder_volume(cloud["a-member"], ceph.unique_name("unprotected")) as bare:
        listed = os_cairn.call("GET", "/v1/volumes", token)
        assert listed.status_code == 200, listed.text
        by_id = {v["id"]: v for v in listed.json()["volumes"]}
        # The Overview counts the project's Cinder volumes, the unprotected one among them.
        counts = os_cairn.call("GET", "/v1/overview", token).json()
        everything = os_cairn.call("GET", "/v1/volumes", token, params={"limit": 1000}).json()
        assert counts["volumes"] == len(everything["volumes"]), counts
        assert counts["protected"] == sum(v["protected"] for v in everything["volumes"])
        assert counts["unprotected"] == counts["volumes"] - counts["protected"] >= 1
    mine = by_id[protected.volume_id]
    assert mine["protected"] is True
    assert [p["id"] for p in mine["plans"]] == [protected.plan_id]
    assert mine["restore_points"] == 1
    assert mine["newest_restore_point"]["id"] == protected.restore_point_id
    assert 0 <= mine["newest_restore_point"]["age_seconds"] < 600
    assert by_id[bare]["protected"] is False
    assert by_id[bare]["newest_restore_point"] is None
    # When its plan runs next (02:00 UTC, the plan's rule), and what its last backup did.
    next_run = datetime.fromisoformat(mine["next_run_at"])
    assert (next_run.hour, next_run.minute) == (2, 0)
    assert 0 < (next_run - datetime.now(UTC)).total_seconds() <= 86400
    assert mine["last_backup"]["status"] == "succeeded", mine["last_backup"]
    assert mine["last_backup"]["error"] is None
    assert (by_id[bare]["next_run_at"], by_id[bare]["last_backup"]) == (None, None)


def test_volume_list_pages_through_cinder(cloud: Cloud, os_cairn: OpenStackCairn,
                                         protected: Protected) -> None:
    member = cloud["a-member"]
    token = member.token()
    # Cinder deletes in the background: a volume the tests before this one deleted is
    # listed until it is gone, and may go between two pages (or be a page's marker).
    deadline = time.monotonic() + 120
    while any(v.status == "deleting" for v in member.cinder().list_volumes()):
        assert time.monotonic() < deadline, "project A's volumes are still being deleted"
        time.sleep(0.5)
    with contextlib.ExitStack() as made:
        bare = [made.enter_context(cinder_volume(member, ceph.unique_name("paged")))
                for _ in range(3)]
        # Project A holds at least these three and the protected one, and whatever the
        # tests before this one left: page through all of it, two at a time.
        whole = os_cairn.call("GET", "/v1/volumes", token, params={"limit": 1000}).json()
        paged: list[str] = []
        marker = None
        for _ in range(500):
            page = os_cairn.call("GET", "/v1/volumes", token, params={
                "limit": 2, **({"marker": marker} if marker else {})}).json()
            # A full last page still names a marker; the page after it is empty and ends.
            assert len(page["volumes"]) == 2 or page["next_marker"] is None, page
            paged += [v["id"] for v in page["volumes"]]
            marker = page["next_marker"]
            if marker is None:
                break
        # Newest first, no volume twice, none skipped.
        assert paged == [v["id"] for v in whole["volumes"]]
        assert len(set(paged)) == len(paged) >= 4
        assert set(bare) | {protected.volume_id} <= set(paged)

        # Unprotected only: the page fills with unprotected volumes, read on past the rest.
        seen: list[dict[str, Any]] = []
        marker = None
        for _ in range(1000):
            page = os_cairn.call("GET", "/v1/volumes", token, params={
                "limit": 1, "unprotected": "true", **({"marker": marker} if marker else {})})
            assert page.status_code == 200, page.text
            seen += page.json()["volumes"]
            marker = page.json()["next_marker"]
            if marker is None:
                break
        assert set(bare) <= {v["id"] for v in seen}
        assert not any(v["protected"] for v in seen)
        assert protected.volume_id not in {v["id"] for v in seen}

    one = os_cairn.call("GET", f"/v1/volumes/{protected.volume_id}", token)
    assert one.status_code == 200, one.text
    assert one.json()["plans"][0]["id"] == protected.plan_id
    # Another project's volume is not found, as Cinder says; a marker that is no volume of
    # the project is a 422 that says so, not a 500.
    other = os_cairn.call("GET", f"/v1/volumes/{protected.volume_id}",
                          cloud["b-member"].token())
    assert other.status_code == 404, other.text
    unknown = os_cairn.call("GET", "/v1/volumes", token,
                            params={"marker": "00000000-0000-4000-8000-000000000000"})
    assert unknown.status_code == 422, unknown.text
    assert unknown.json()["error"]["message"].startswith(
        "marker 00000000-0000-4000-8000-000000000000: no volume of your project has this id"
    ), unknown.text


def test_restore_into_new_cinder_volume_is_byte_exact(cloud: Cloud, os_cairn: OpenStackCairn,
                                                      protected: Protected) -> None:
    member = cloud["a-member"]
    token = member.token()
    response = os_cairn.call("POST", f"/v1/restore-points/{protected.restore_point_id}/restore",
                             token, json={"new_volume": {"name": "restored-copy"}})
    assert response.status_code == 202, response.text
    new_id = response.json()["restore_volume_id"]
    assert new_id
    try:
        job = os_cairn.wait_job(response.json()["id"], token)
        assert job["status"] == "succeeded", job
        volume = member.cinder().get(new_id)
        assert volume.status == "available"
        assert volume.name == "restored-copy"
        rp = os_cairn.call("GET", f"/v1/restore-points/{protected.restore_point_id}",
                           token).json()
        assert rp["source_bootable"] is True
        assert volume.bootable  # a copy of a boot disk boots
        with ceph.ioctx("ceph-a", "volumes") as io:
            assert ceph.sha256_of(io, image_of(new_id)) == protected.snapshot_sha256
            # Sparse: only the data written to the source is allocated in the copy.
            assert ceph.allocated_bytes(io, image_of(new_id)) <= 24 * ceph.MiB
    finally:
        delete_volume(member, new_id)


def test_restore_in_place_onto_attached_volume_is_refused(cloud: Cloud,
                                                          os_cairn: OpenStackCairn,
                                                          protected: Protected) -> None:
    member = cloud["a-member"]
    with cinder_volume(member, ceph.unique_name("attached")) as target:
        server = attach(member, target)
        response = os_cairn.call(
            "POST", f"/v1/restore-points/{protected.restore_point_id}/restore",
            member.token(), json={"volume_id": target})
        assert response.status_code == 409, response.text
        message = response.json()["error"]["message"]
        assert "attached" in message
        assert server in message
        assert "Detach" in message
        assert member.cinder().get(target).status == "in-use"  # untouched


def test_restore_in_place_onto_detached_volume(cloud: Cloud, os_cairn: OpenStackCairn,
                                               protected: Protected) -> None:
    member = cloud["a-member"]
    token = member.token()
    with cinder_volume(member, ceph.unique_name("in-place")) as target:
        with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(target)) as image:
            image.write(b"\xff" * (8 * ceph.MiB), 40 * ceph.MiB)  # to be discarded
        response = os_cairn.call(
            "POST", f"/v1/restore-points/{protected.restore_point_id}/restore", token,
            json={"volume_id": target})
        assert response.status_code == 202, response.text
        seen: set[str] = set()
        job_id = response.json()["id"]
        while True:
            seen.add(member.cinder().get(target).status)
            job = os_cairn.call("GET", f"/v1/jobs/{job_id}", token).json()
            if job["status"] not in ("queued", "running"):
                break
        assert job["status"] == "succeeded", job
        restored = member.cinder().get(target)
        assert restored.status == "available"
        assert restored.bootable  # it holds the boot disk now
        with ceph.ioctx("ceph-a", "volumes") as io:
            assert ceph.sha256_of(io, image_of(target)) == protected.snapshot_sha256
        # Held away from servers meanwhile, never in-use.
        assert "in-use" not in seen


def _cancel_when_running(os_cairn: OpenStackCairn, token: str, job_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while True:  # until it has written a little
        job = os_cairn.call("GET", f"/v1/jobs/{job_id}", token).json()
        if job["status"] not in ("queued", "running") or job["progress"]["bytes_done"] > 0:
            break
        assert time.monotonic() < deadline, f"the restore never started: {job}"
        time.sleep(0.1)
    assert os_cairn.call("POST", f"/v1/jobs/{job_id}/cancel", token).status_code == 202
    return os_cairn.wait_job(job_id, token)


def wait_until_deleted(member: User, volume_id: str) -> None:
    """Until Cinder no longer knows the volume; it may only be `deleting` meanwhile."""
    deadline = time.monotonic() + 60
    while True:
        try:
            status = member.cinder().get(volume_id).status
        except VolumeNotFound:
            return
        assert status == "deleting", status
        assert time.monotonic() < deadline, "Cinder never finished deleting the volume"
        time.sleep(0.3)


def test_cancelled_restore_deletes_the_new_volume(cloud: Cloud, os_cairn: OpenStackCairn,
                                                  protected: Protected) -> None:
    member = cloud["a-member"]
    token = member.token()
    response = os_cairn.call(
        "POST", f"/v1/restore-points/{protected.restore_point_id}/restore", token,
        json={"new_volume": {"name": "to-cancel"}, "qos_bytes_per_second": 2 * ceph.MiB})
    assert response.status_code == 202, response.text
    new_id = response.json()["restore_volume_id"]
    job = _cancel_when_running(os_cairn, token, response.json()["id"])
    assert job["status"] == "cancelled", job
    assert f"deleted the new Cinder volume {new_id}" in job["error"]["message"]
    wait_until_deleted(member, new_id)


def test_cancelled_restore_in_place_leaves_the_volume_in_error(
        cloud: Cloud, os_cairn: OpenStackCairn, protected: Protected) -> None:
    member = cloud["a-member"]
    token = member.token()
    with cinder_volume(member, ceph.unique_name("half")) as target:
        response = os_cairn.call(
            "POST", f"/v1/restore-points/{protected.restore_point_id}/restore", token,
            json={"volume_id": target, "qos_bytes_per_second": 2 * ceph.MiB})
        assert response.status_code == 202, response.text
        job = _cancel_when_running(os_cairn, token, response.json()["id"])
        assert job["status"] == "cancelled", job
        assert "partly overwritten and is set to error" in job["error"]["message"]
        assert member.cinder().get(target).status == "error"


def test_cancelling_a_queued_restore_deletes_its_new_volume(
        cloud: Cloud, os_cairn: OpenStackCairn, protected: Protected) -> None:
    member = cloud["a-member"]
    token = member.token()
    worker = os_cairn.processes[0]
    assert worker.name == "cairn-worker"
    worker.stop()  # the restore stays queued: no worker takes it
    try:
        response = os_cairn.call(
            "POST", f"/v1/restore-points/{protected.restore_point_id}/restore", token,
            json={"new_volume": {"name": "queued-then-cancelled"}})
        assert response.status_code == 202, response.text
        new_id = response.json()["restore_volume_id"]
        cancelled = os_cairn.call("POST", f"/v1/jobs/{response.json()['id']}/cancel", token)
        assert cancelled.status_code == 202, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        assert cancelled.json()["warnings"] == []
        # Before, the volume stayed: nothing would ever restore into it or remove it.
        wait_until_deleted(member, new_id)
    finally:
        worker.start("ready")
