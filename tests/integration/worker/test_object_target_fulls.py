"""Fulls and retries on an object target (real API, worker and Ceph RGW): a repeated full
reads only the objects changed since the previous restore point's source snapshot, and
still restores byte-exact on its own once that restore point is deleted and collected; a
full whose previous source snapshot is gone reads everything; a backup whose worker is
SIGKILLed mid-way is retried and looks up only the chunks its checkpoint did not confirm."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import rados
import rbd

from services.clock import clock_for
from services.db import Database
from services.storage.ceph import CephClusters
from services.storage.object_layout import checkpoint_key
from services.storage.s3 import Bucket
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import (
    backup,
    restore,
    restore_point,
    start_backup,
    wait_for_progress,
)
from tests.support.stack import Stack
from worker.managers import object_gc
from worker.runtime import Runtime

pytestmark = pytest.mark.ceph

TARGET = "s3"
OBJECT = 4 * MiB


@pytest.fixture
def dense(volumes_pool: rados.Ioctx) -> Iterator[str]:
    with ceph.dense_image(volumes_pool, "s3-fulls", 32 * MiB, seed=81) as name:
        yield name


def collect_garbage(stack: Stack) -> None:
    settings = stack.settings
    rt = Runtime(settings, Database(settings.database_url), CephClusters(settings),
                 "test-gc", None, clock_for(None))  # type: ignore[arg-type]
    try:
        assert object_gc.collect(rt, TARGET, grace_seconds=0) is not None
    finally:
        rt.db.dispose()


def full(stack: Stack, volume: str) -> tuple[dict[str, object], dict[str, object]]:
    job = backup(stack, volume, target=TARGET, kind="full")
    rp = restore_point(stack, str(job["restore_point_id"]))
    assert (rp["kind"], rp["status"], rp["base_restore_point_id"]) == \
        ("full", "available", None), rp
    return job, rp


def test_a_repeated_full_reads_what_changed_and_restores_alone_after_the_previous_goes(
        stack: Stack, dense: str, volumes_pool: rados.Ioctx, images: list[str],
        bucket: Bucket) -> None:
    _job, first = full(stack, dense)
    assert first["bytes_read"] == 32 * MiB, first
    with rbd.Image(volumes_pool, dense) as image:  # two of the eight objects change
        image.write(ceph._Random(82).bytes(5000), 4 * MiB + 10)
        image.write(ceph._Random(83).bytes(5000), 20 * MiB + 4096)
    job, second = full(stack, dense)
    assert second["bytes_read"] == 2 * OBJECT, second
    assert job["progress"]["bytes_read"] == 2 * OBJECT, job
    assert "taken unread from restore point" in job["summary"], job
    sha = ceph.sha256_of(volumes_pool, dense)

    # The full stands alone: its predecessor deleted and its chunks collected.
    response = stack.delete(f"/v1/restore-points/{first['id']}")
    assert response.status_code == 202, response.text
    assert stack.wait_job(response.json()["id"])["status"] == "succeeded"
    collect_garbage(stack)
    restored = ceph.unique_name("s3-synthetic-restored")
    images.append(restored)
    restore(stack, str(second["id"]), restored)
    assert ceph.sha256_of(volumes_pool, restored) == sha


def test_a_full_reads_everything_when_the_previous_source_snapshot_is_gone(
        stack: Stack, dense: str, volumes_pool: rados.Ioctx, images: list[str],
        bucket: Bucket) -> None:
    _job, first = full(stack, dense)
    with rbd.Image(volumes_pool, dense) as image:
        image.write(ceph._Random(84).bytes(5000), 8 * MiB)
        image.remove_snap(f"cairn.{first['id']}")  # an operator's cleanup script
    job, second = full(stack, dense)
    assert second["bytes_read"] == 32 * MiB, second
    assert "taken unread" not in job["summary"], job
    restored = ceph.unique_name("s3-reread-restored")
    images.append(restored)
    restore(stack, str(second["id"]), restored)
    assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool, dense)


def test_a_killed_backup_looks_up_only_what_its_checkpoint_did_not_confirm(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str], bucket: Bucket) -> None:
    chunk = stack.settings.object_targets[TARGET].chunk_size_mib * MiB
    with ceph.dense_image(volumes_pool, "s3-killed", 64 * MiB, seed=85) as volume:
        job = start_backup(stack, volume, target=TARGET, qos_bytes_per_second=8 * MiB)
        wait_for_progress(stack, job["id"], 28 * MiB)
        stack.worker.kill()
        stack.worker.start("ready")

        done = stack.wait_job(job["id"], timeout=120)
        assert (done["status"], done["attempt"]) == ("succeeded", 2), done
        found = re.search(r"(\d+) looked up, (\d+) confirmed by an earlier attempt",
                          done["summary"] or "")
        assert found, done
        looked_up, confirmed = int(found[1]), int(found[2])
        # The killed attempt's checkpoint trails it by the window in flight and one
        # progress interval: well past 16 MiB of the 28 MiB it had read.
        assert confirmed * chunk >= 16 * MiB, done
        assert looked_up + confirmed == 64 * MiB // chunk, done  # no chunk asked twice
        rp = restore_point(stack, done["restore_point_id"])
        assert bucket.size(checkpoint_key(str(rp["project_id"]), str(rp["id"]))) is None
        restored = ceph.unique_name("s3-killed-restored")
        images.append(restored)
        restore(stack, str(rp["id"]), restored)
        assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool, volume)
