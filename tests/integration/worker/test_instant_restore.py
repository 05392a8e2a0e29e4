"""Instant restore into a new RBD image on the real cluster: the image is usable (reads
equal the restore point's bytes) before the flatten ends, the tenant's writes never reach
the backup, the restore point refuses deletion until the flatten is done, a worker killed
mid-flatten resumes it, and cross-cluster or in-place instant restores are refused."""

from __future__ import annotations

import time
from typing import Any

import pytest
import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import backup, restore_point, start_restore, wait_for_progress
from tests.support.stack import HEADERS, Stack

pytestmark = pytest.mark.ceph

ODD_SIZE = 37 * MiB + 4097
"""Not a multiple of the object size: the last object is partial."""


def _wait_ready(stack: Stack, job_id: str, timeout: float = 60) -> dict[str, Any]:
    """Until the job says its image is usable; asserts it is still flattening then."""
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = stack.get(f"/v1/jobs/{job_id}").json()
        if job["timings"]["ready_at"] is not None:
            return job
        assert job["status"] in ("queued", "running"), job
        assert time.monotonic() < deadline, f"never ready: {job}"
        time.sleep(0.05)


def _parent(io: rados.Ioctx, name: str) -> str | None:
    with rbd.Image(io, name, read_only=True) as image:
        try:
            return str(image.get_parent_image_spec()["image_name"])
        except rbd.ImageNotFound:
            return None


@pytest.fixture
def protected_odd(stack: Stack, volumes_pool: rados.Ioctx,
                  backups_pool: rados.Ioctx) -> Any:
    source = ceph.unique_name("instant-src")
    ceph.make_mixed_image(volumes_pool, source, size=ODD_SIZE, seed=61)
    rp = restore_point(stack, backup(stack, source)["restore_point_id"])
    snapshot_sha = ceph.sha256_of(backups_pool, rp["backup_image"], rp["backup_snapshot"])
    assert snapshot_sha == ceph.sha256_of(volumes_pool, source)
    yield rp, snapshot_sha
    ceph.remove_image(volumes_pool, source)


def test_usable_before_the_flatten_and_byte_exact_after(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        protected_odd: Any) -> None:
    rp, snapshot_sha = protected_odd
    name = ceph.unique_name("instant")
    # Paced so the flatten takes several seconds: the checks below happen while it runs.
    job = start_restore(stack, rp["id"], name, mode="instant",
                        qos_bytes_per_second=4 * MiB)
    assert job["restore_method"] == "instant"
    try:
        ready = _wait_ready(stack, job["id"])
        assert ready["status"] == "running", "the flatten ended before it could be checked"
        started = ready["timings"]["started_at"]
        assert ready["timings"]["finished_at"] is None
        assert started is not None
        # Usable now: a clone of the backup snapshot, reading the restore point's bytes.
        assert _parent(volumes_pool, name) == rp["backup_image"]
        assert ceph.sha256_of(volumes_pool, name) == snapshot_sha

        refused = stack.delete(f"/v1/restore-points/{rp['id']}")
        assert refused.status_code == 409, refused.text
        message = refused.json()["error"]["message"]
        assert job["id"] in message
        assert "flatten" in message
        cancel = stack.post(f"/v1/jobs/{job['id']}/cancel", {})
        assert cancel.status_code == 409, cancel.text

        # The tenant writes to the new image: the backup never sees it.
        with rbd.Image(volumes_pool, name) as image:
            image.write(b"tenant data after the restore" * 4000, 3 * MiB)
            image.write(b"\x01" * 4096, ODD_SIZE - 4096)
        written_sha = ceph.sha256_of(volumes_pool, name)
        assert ceph.sha256_of(backups_pool, rp["backup_image"], rp["backup_snapshot"]) \
            == snapshot_sha

        done = stack.wait_job(job["id"], timeout=120)
        assert done["status"] == "succeeded", done
        assert done["timings"]["ready_at"] < done["timings"]["finished_at"]
        assert done["progress"]["percent"] == 100.0
        assert {"clone", "commit", "flatten"} <= set(done["timings"]["phases"])
        assert _parent(volumes_pool, name) is None  # flattened: on its own now
        assert ceph.sha256_of(volumes_pool, name) == written_sha
        assert ceph.sha256_of(backups_pool, rp["backup_image"], rp["backup_snapshot"]) \
            == snapshot_sha

        deleted = stack.delete(f"/v1/restore-points/{rp['id']}")
        assert deleted.status_code == 202, deleted.text
        assert stack.wait_job(deleted.json()["id"])["status"] == "succeeded"
        assert ceph.sha256_of(volumes_pool, name) == written_sha
    finally:
        ceph.remove_image(volumes_pool, name)


def test_a_worker_killed_mid_flatten_resumes_it(
        stack: Stack, volumes_pool: rados.Ioctx, protected_odd: Any) -> None:
    rp, snapshot_sha = protected_odd
    name = ceph.unique_name("instant-kill")
    job = start_restore(stack, rp["id"], name, mode="instant",
                        qos_bytes_per_second=2 * MiB)
    try:
        ready = _wait_ready(stack, job["id"])
        wait_for_progress(stack, job["id"], 4 * MiB)
        stack.worker.kill()
        # Between the attempts the image stays usable and exact.
        assert ceph.sha256_of(volumes_pool, name) == snapshot_sha
        stack.worker.start("ready")
        unthrottled = stack.client.patch(f"/v1/jobs/{job['id']}", headers=HEADERS,
                                         json={"qos_bytes_per_second": None})
        assert unthrottled.status_code == 200, unthrottled.text

        done = stack.wait_job(job["id"], timeout=180)
        assert done["status"] == "succeeded", done
        assert done["attempt"] == 2
        assert done["timings"]["ready_at"] == ready["timings"]["ready_at"]  # not made again
        assert _parent(volumes_pool, name) is None
        assert ceph.sha256_of(volumes_pool, name) == snapshot_sha
    finally:
        ceph.remove_image(volumes_pool, name)


def test_instant_restore_to_another_cluster_is_refused(
        stack: Stack, offsite_volumes: rados.Ioctx, protected_odd: Any) -> None:
    rp, _sha = protected_odd
    name = ceph.unique_name("instant-far")
    response = stack.post(f"/v1/restore-points/{rp['id']}/restore",
                          {"target": f"ceph-b/volumes/{name}", "mode": "instant"})
    assert response.status_code == 409, response.text
    assert "use a normal restore" in response.json()["error"]["message"]
    assert name not in ceph.image_names(offsite_volumes)


def test_instant_restore_in_place_is_refused(stack: Stack, protected_odd: Any) -> None:
    rp, _sha = protected_odd
    response = stack.post(f"/v1/restore-points/{rp['id']}/restore",
                          {"volume_id": "5f0c2a64-54b5-4d8b-9bb6-2f3f1c3f6d1e",
                           "mode": "instant"})
    assert response.status_code == 422, response.text
    assert "in place" in response.text


def test_a_delete_refuses_a_snapshot_that_still_backs_a_clone(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        protected_odd: Any) -> None:
    """A clone no running job accounts for (an instant restore whose flatten gave up):
    the delete job refuses before removing anything, and the restore point stays
    available and whole (librbd would otherwise hide the snapshot in its trash)."""
    rp, snapshot_sha = protected_odd
    clone = ceph.unique_name("left-clone")
    cluster = ceph.connect("ceph-a", rbd_default_clone_format="2")
    try:
        with cluster.open_ioctx("backups") as bio, cluster.open_ioctx("volumes") as vio:
            rbd.RBD().clone(bio, rp["backup_image"], rp["backup_snapshot"], vio, clone)
    finally:
        cluster.shutdown()
    try:
        answer = stack.delete(f"/v1/restore-points/{rp['id']}")
        assert answer.status_code == 202, answer.text
        job = stack.wait_job(answer.json()["id"])
        assert job["status"] == "failed", job
        assert job["error"]["code"] == "restore_point_busy"
        assert f"volumes/{clone}" in job["error"]["message"]
        after = stack.get(f"/v1/restore-points/{rp['id']}").json()
        assert after["status"] == "available", after
        assert ceph.sha256_of(backups_pool, rp["backup_image"], rp["backup_snapshot"]) \
            == snapshot_sha
    finally:
        ceph.remove_image(volumes_pool, clone)
