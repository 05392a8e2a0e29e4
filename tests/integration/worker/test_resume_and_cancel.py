"""A backup or a restore (from either kind of target) whose worker is SIGKILLed mid-copy
resumes from its checkpoint (it does not start over) and ends byte-exact; a cancelled
backup or restore leaves nothing behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import rados
import rbd

from services.restore_points.marks import CHECKPOINT_KEY, DONE_KEY
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import (
    backup,
    restore_point,
    start_backup,
    start_restore,
    wait_for_progress,
)
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph


@pytest.fixture
def dense_volume(volumes_pool: rados.Ioctx) -> Iterator[str]:
    with ceph.dense_image(volumes_pool, "dense", 64 * MiB, seed=8) as name:
        yield name


def _cairn_objects(io: rados.Ioctx, rp_id: str) -> list[str]:
    return [o.key for o in io.list_objects() if rp_id in o.key]


def test_killed_backup_resumes_where_it_stopped(stack: Stack, dense_volume: str,
                                                volumes_pool: rados.Ioctx,
                                                backups_pool: rados.Ioctx) -> None:
    job = start_backup(stack, dense_volume, qos_bytes_per_second=8 * MiB)
    wait_for_progress(stack, job["id"], 28 * MiB)
    stack.worker.kill()
    stack.worker.start("ready")

    done = stack.wait_job(job["id"], timeout=60)
    assert done["status"] == "succeeded", done
    assert done["attempt"] == 2
    progress = done["progress"]
    assert progress["bytes_total"] == 64 * MiB
    assert progress["bytes_resumed"] >= 16 * MiB, "the retry started over"
    window = stack.settings.copy_window * 4 * MiB
    remaining = progress["bytes_total"] - progress["bytes_resumed"]
    # The retry read what was left, plus at most the window that was in flight at the kill.
    assert progress["bytes_read"] <= remaining + window, progress
    rp = restore_point(stack, done["restore_point_id"])
    assert rp["status"] == "available"
    assert ceph.sha256_of(backups_pool, rp["backup_image"], rp["backup_snapshot"]) == \
        ceph.sha256_of(volumes_pool, dense_volume)
    # The checkpoint is gone once the restore point is complete.
    assert not [o for o in _cairn_objects(backups_pool, rp["id"]) if "checkpoint" in o]


@pytest.mark.parametrize("target", ["local", "s3"])
def test_killed_restore_resumes_where_it_stopped(stack: Stack, dense_volume: str,
                                                 volumes_pool: rados.Ioctx, images: list[str],
                                                 target: str) -> None:
    """The same rule for every kind (worker/managers/destination.py): the retry finds its
    own image and resumes at the checkpoint the killed attempt left in it."""
    if target not in {*stack.settings.backup_targets, *stack.settings.object_targets}:
        pytest.fail(f"target {target!r} is not configured: start the stack with CAIRN_RGW=1")
    rp_id = backup(stack, dense_volume, target=target)["restore_point_id"]
    restored = ceph.unique_name("resumed-restore")
    images.append(restored)
    job = start_restore(stack, rp_id, restored, qos_bytes_per_second=8 * MiB)
    wait_for_progress(stack, job["id"], 28 * MiB)
    stack.worker.kill()
    stack.worker.start("ready")

    done = stack.wait_job(job["id"], timeout=60)
    assert (done["status"], done["attempt"]) == ("succeeded", 2), done
    progress = done["progress"]
    assert progress["bytes_total"] == 64 * MiB
    # The checkpoint trails the kill by the window in flight and one progress interval.
    assert progress["bytes_resumed"] >= 8 * MiB, "the retry started over"
    assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool, dense_volume)
    with rbd.Image(volumes_pool, restored, read_only=True) as image, \
            pytest.raises(KeyError):  # the checkpoint is gone once the restore is complete
        image.metadata_get("cairn.restore_checkpoint")


def _checkpointed(io: rados.Ioctx, name: str, job_id: str, chunks: int) -> set[int]:
    """The chunks the checkpoint in restore image `name` names as written."""
    with rbd.Image(io, name, read_only=True) as image:
        mark = int(image.metadata_get(CHECKPOINT_KEY))
        owner, _, listed = dict(image.metadata_list()).get(DONE_KEY, " ").partition(" ")
    past = {int(i) for i in listed.split(",") if i} if owner == job_id else set()
    return set(range(min(mark, chunks))) | past


def test_killed_object_target_restore_fetches_no_chunk_its_checkpoint_names(
        stack: Stack, dense_volume: str, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """Many chunks in flight finish out of order: the checkpoint keeps its mark and the
    chunks done past it, and the retry fetches exactly the others (the job's bytes_read is
    what this attempt fetched)."""
    if "s3" not in stack.settings.object_targets:
        pytest.fail("target 's3' is not configured: start the stack with CAIRN_RGW=1")
    chunk = stack.settings.object_targets["s3"].chunk_size_mib * MiB
    rp_id = backup(stack, dense_volume, target="s3")["restore_point_id"]
    restored = ceph.unique_name("resumed-s3-restore")
    images.append(restored)
    job = start_restore(stack, rp_id, restored, qos_bytes_per_second=8 * MiB)
    wait_for_progress(stack, job["id"], 28 * MiB)
    stack.worker.kill()
    written = _checkpointed(volumes_pool, restored, job["id"], 64 * MiB // chunk)
    assert written, "the killed attempt left no checkpoint"
    stack.worker.start("ready")

    done = stack.wait_job(job["id"], timeout=60)
    assert (done["status"], done["attempt"]) == ("succeeded", 2), done
    progress = done["progress"]
    assert progress["bytes_total"] == 64 * MiB
    assert progress["bytes_resumed"] == len(written) * chunk, (sorted(written), progress)
    assert progress["bytes_read"] == 64 * MiB - len(written) * chunk, progress
    assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool, dense_volume)
    with rbd.Image(volumes_pool, restored, read_only=True) as image:
        assert CHECKPOINT_KEY not in dict(image.metadata_list())
        assert DONE_KEY not in dict(image.metadata_list())


def test_cancel_a_running_backup_leaves_nothing_behind(
        stack: Stack, dense_volume: str, volumes_pool: rados.Ioctx,
        backups_pool: rados.Ioctx) -> None:
    job = start_backup(stack, dense_volume, qos_bytes_per_second=8 * MiB)
    backup_image = restore_point(stack, job["restore_point_id"])["backup_image"]
    wait_for_progress(stack, job["id"], 8 * MiB)
    response = stack.post(f"/v1/jobs/{job['id']}/cancel", {})
    assert response.status_code == 202, response.text
    assert response.json()["cancel_requested"] is True

    done = stack.wait_job(job["id"], timeout=30)
    assert done["status"] == "cancelled", done
    assert done["error"]["code"] == "cancelled"
    assert done["progress"]["bytes_done"] < 64 * MiB
    rp_id = done["restore_point_id"]
    assert stack.get(f"/v1/restore-points/{rp_id}").status_code == 404
    assert ceph.snapshots(volumes_pool, dense_volume) == []
    assert backup_image not in ceph.image_names(backups_pool)
    assert _cairn_objects(backups_pool, rp_id) == []

    again = stack.post(f"/v1/jobs/{job['id']}/cancel", {})
    assert again.status_code == 409
    assert "already cancelled" in again.json()["error"]["message"]


def test_cancel_a_running_restore_removes_the_partial_image(
        stack: Stack, dense_volume: str, volumes_pool: rados.Ioctx) -> None:
    rp_id = backup(stack, dense_volume)["restore_point_id"]
    target = ceph.unique_name("cancelled-restore")
    job = start_restore(stack, rp_id, target, qos_bytes_per_second=8 * MiB)
    wait_for_progress(stack, job["id"], 8 * MiB)
    assert target in ceph.image_names(volumes_pool)
    assert stack.post(f"/v1/jobs/{job['id']}/cancel", {}).status_code == 202

    done = stack.wait_job(job["id"], timeout=30)
    assert done["status"] == "cancelled", done
    assert target not in ceph.image_names(volumes_pool)
    assert restore_point(stack, rp_id)["status"] == "available"


def test_a_delete_job_cannot_be_cancelled(stack: Stack, dense_volume: str) -> None:
    rp_id = backup(stack, dense_volume)["restore_point_id"]
    job = stack.delete(f"/v1/restore-points/{rp_id}").json()
    response = stack.post(f"/v1/jobs/{job['id']}/cancel", {})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "job_not_cancellable"
