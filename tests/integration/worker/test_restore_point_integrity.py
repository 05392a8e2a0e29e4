"""Restore points never lie (issue 12): every way found to make an `available` restore point
that does not restore, or to lose one after it became available, on the real micro Ceph.
Each test failed before its fix."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import rados
import rbd
from sqlalchemy import update

from services.base import utcnow
from services.db import Database
from services.records.jobs import Job
from services.status import JobStatus
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import (
    backup,
    restore,
    restore_point,
    start_backup,
    start_restore,
    wait_for_progress,
)
from tests.support.stack import HEADERS, Stack

pytestmark = pytest.mark.ceph


def _image(io: rados.Ioctx, images: list[str], prefix: str, size: int, seed: int) -> str:
    name = ceph.random_image(io, prefix, size, seed=seed)
    images.append(name)
    return name


def _restores_exactly(stack: Stack, volumes_pool: rados.Ioctx, images: list[str],
                      rp_id: str, source: str) -> None:
    """Restore `rp_id` into a new image; it must hold the source snapshot's bytes."""
    target = ceph.unique_name("restored")
    images.append(target)
    restore(stack, rp_id, target)
    assert ceph.sha256_of(volumes_pool, target) == \
        ceph.sha256_of(volumes_pool, source, f"cairn.{rp_id}")


@pytest.mark.parametrize(("size", "grown", "tail"), [
    (10_000_077, 22_587_085, False),       # the report: unaligned grow, tail never written
    (10_000_077, 22_587_085, True),        # and with the new tail written
    (37 * 4 * MiB - 1234, 41 * 4 * MiB + 99, False),  # an object straddling the old end
    (22_587_085, 10_000_077, False),       # an unaligned shrink
    (9 * MiB, 5 * MiB + 3, False),         # shrink to a partial object, grow again below
])
def test_resized_volume_incremental_restores_exactly(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str], size: int, grown: int,
        tail: bool) -> None:
    name = _image(volumes_pool, images, "resize", size, seed=size % 97)
    backup(stack, name)
    with rbd.Image(volumes_pool, name) as image:
        image.resize(grown)
        if tail and grown > size:
            image.write(ceph._Random(5).bytes(grown - size), size)
    job = backup(stack, name)
    rp = restore_point(stack, job["restore_point_id"])
    assert rp["kind"] == "incremental"
    _restores_exactly(stack, volumes_pool, images, rp["id"], name)


def test_failure_after_available_keeps_the_restore_point(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """A tenant protects the older source snapshot: removing it after the new restore point
    became available fails, which is a warning on the job, not a cleanup."""
    name = _image(volumes_pool, images, "protect", 9 * MiB + 5, seed=3)
    first = backup(stack, name)
    with rbd.Image(volumes_pool, name) as image:
        image.protect_snap(f"cairn.{first['restore_point_id']}")
        image.write(ceph._Random(4).bytes(MiB), 2 * MiB)
    try:
        second = stack.wait_job(start_backup(stack, name)["id"])
        assert second["status"] == "succeeded", second
        assert any(f"cairn.{first['restore_point_id']}" in w for w in second["warnings"]), \
            second["warnings"]
        rp = restore_point(stack, second["restore_point_id"])
        assert rp["status"] == "available"
        _restores_exactly(stack, volumes_pool, images, rp["id"], name)
    finally:
        with rbd.Image(volumes_pool, name) as image:
            image.unprotect_snap(f"cairn.{first['restore_point_id']}")


@pytest.mark.parametrize("attempt", ["retry", "out_of_attempts"])
def test_worker_killed_after_available_never_removes_it(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        images: list[str], attempt: str) -> None:
    """The state a worker killed between `available` and the job's end leaves: the job
    `running` with a stale heartbeat. Its retry (or its give-up) must finish the job and
    keep the restore point."""
    name = _image(volumes_pool, images, "killwin", 6 * MiB + 77, seed=11)
    job = backup(stack, name)
    rp_id = job["restore_point_id"]
    db = Database(stack.settings.database_url)
    try:
        with db.session() as session:
            session.execute(update(Job).where(Job.id == job["id"]).values(
                status=JobStatus.RUNNING, finished_at=None,
                attempt=1 if attempt == "retry" else job["max_attempts"],
                heartbeat_at=utcnow() - timedelta(hours=1)))
    finally:
        db.dispose()
    deadline = time.monotonic() + 60
    while stack.get(f"/v1/jobs/{job['id']}").json()["status"] == "running":
        assert time.monotonic() < deadline, "the reconciler never picked the job up"
        time.sleep(0.2)
    done = stack.wait_job(job["id"])
    assert done["status"] == "succeeded", done
    rp = restore_point(stack, rp_id)
    assert rp["status"] == "available"
    assert f"cairn.{rp_id}" in ceph.snapshots(backups_pool, rp["backup_image"])
    _restores_exactly(stack, volumes_pool, images, rp_id, name)


def test_retry_after_source_snapshot_vanished_starts_over(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        images: list[str]) -> None:
    """The killed attempt's checkpoint describes the old snapshot; resuming it onto a new
    snapshot of the changed volume would mix two points in time."""
    name = _image(volumes_pool, images, "vanish", 32 * MiB, seed=21)
    job = start_backup(stack, name, qos_bytes_per_second=8 * MiB)
    wait_for_progress(stack, job["id"], 12 * MiB)
    stack.worker.kill()
    rp_id = job["restore_point_id"]
    with rbd.Image(volumes_pool, name) as image:
        image.remove_snap(f"cairn.{rp_id}")
        image.write(ceph._Random(22).bytes(32 * MiB), 0)
    stack.worker.start("ready")
    done = stack.wait_job(job["id"], timeout=90)
    assert done["status"] == "succeeded", done
    assert done["progress"]["bytes_resumed"] == 0
    rp = restore_point(stack, rp_id)
    assert ceph.sha256_of(backups_pool, rp["backup_image"], rp["backup_snapshot"]) == \
        ceph.sha256_of(volumes_pool, name)
    _restores_exactly(stack, volumes_pool, images, rp_id, name)


def test_damaged_checkpoint_starts_over(stack: Stack, volumes_pool: rados.Ioctx,
                                        backups_pool: rados.Ioctx,
                                        images: list[str]) -> None:
    name = _image(volumes_pool, images, "ckpt", 32 * MiB, seed=23)
    job = start_backup(stack, name, qos_bytes_per_second=8 * MiB)
    wait_for_progress(stack, job["id"], 12 * MiB)
    stack.worker.kill()
    backups_pool.set_xattr(f"cairn.checkpoint.{job['restore_point_id']}", "resume", b"\xff!")
    stack.worker.start("ready")
    done = stack.wait_job(job["id"], timeout=90)
    assert done["status"] == "succeeded", done
    _restores_exactly(stack, volumes_pool, images, job["restore_point_id"], name)


def test_restore_reads_every_object_the_manifest_names(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        images: list[str]) -> None:
    name = _image(volumes_pool, images, "omitted", 12 * MiB + 4097, seed=31)
    job = backup(stack, name)
    rp = restore_point(stack, job["restore_point_id"])
    ceph.omit_from_snapshot_map(backups_pool, rp["backup_image"], rp["backup_snapshot"], 1)
    target = ceph.unique_name("restored")
    images.append(target)
    done = stack.wait_job(start_restore(stack, rp["id"], target)["id"])
    assert done["status"] == "failed", done
    assert done["error"]["code"] == "data_corrupt"
    assert "object 1 (offset 4194304)" in done["error"]["message"]


def test_backup_leaves_other_volume_rows_snapshots(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """Two projects protect the same image (administrators may name images): one project's
    backup never removes the other's source snapshot, so the other's next backup is still
    an incremental."""
    name = _image(volumes_pool, images, "shared", 5 * MiB + 3, seed=41)
    other = {"X-Project-Id": "project-other", "X-Roles": "member"}
    mine = backup(stack, name)
    theirs = stack.wait_job(stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{name}"},
                                       other).json()["id"], headers=other)
    assert theirs["status"] == "succeeded", theirs
    again = stack.wait_job(stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{name}"},
                                      other).json()["id"], headers=other)
    assert again["status"] == "succeeded", again
    assert f"cairn.{mine['restore_point_id']}" in ceph.snapshots(volumes_pool, name)
    assert any(mine["restore_point_id"] in w for w in again["warnings"]), again["warnings"]
    second = backup(stack, name)
    rp = restore_point(stack, second["restore_point_id"])
    assert rp["kind"] == "incremental", rp["full_reason"]
    _restores_exactly(stack, volumes_pool, images, rp["id"], name)


def _damage_manifest(io: rados.Ioctx, rp_id: str) -> None:
    io.write_full(f"cairn.manifest.{rp_id}.0", b"not zlib at all")


def test_damaged_manifest_makes_the_next_backup_full(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        images: list[str]) -> None:
    name = _image(volumes_pool, images, "mfull", 6 * MiB + 1, seed=51)
    first = backup(stack, name)
    _damage_manifest(backups_pool, first["restore_point_id"])
    second = backup(stack, name)
    rp = restore_point(stack, second["restore_point_id"])
    assert rp["kind"] == "full"
    assert "unusable" in rp["full_reason"]
    assert "damaged" in rp["full_reason"]
    _restores_exactly(stack, volumes_pool, images, rp["id"], name)


def test_verify_marks_a_damaged_manifest_corrupt(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        images: list[str]) -> None:
    name = _image(volumes_pool, images, "mverify", 6 * MiB + 1, seed=52)
    rp_id = backup(stack, name)["restore_point_id"]
    _damage_manifest(backups_pool, rp_id)
    response = stack.post(f"/v1/restore-points/{rp_id}/verify", {})
    assert response.status_code == 202, response.text
    done = stack.wait_job(response.json()["id"])
    assert done["status"] == "failed"
    assert done["error"]["code"] == "data_corrupt"
    rp = restore_point(stack, rp_id)
    assert rp["verification"]["status"] == "corrupt", rp
    refused = stack.post(f"/v1/restore-points/{rp_id}/restore",
                         {"target": ceph.unique_name("never")}, HEADERS)
    assert refused.status_code == 409, refused.text
