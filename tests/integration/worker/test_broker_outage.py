"""Redis lost while the worker has a backup in its hands: the backup still ends with an
available restore point, and the same worker process takes the next job once Redis is
back (with kombu 5.7 alone, Celery called this case unrecoverable and the worker hung
after its job; services/broker.py is the fix)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.databases import migrated_database
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack, start_stack, stop_stack
from tests.support.workers import RedisDb, redis_db

pytestmark = pytest.mark.ceph


@pytest.fixture
def outage_stack(tmp_path: Path) -> Iterator[tuple[Stack, RedisServer]]:
    redis = RedisServer(tmp_path)
    redis.start()
    with migrated_database("postgresql", tmp_path) as url:
        # Its own Redis server; the scratch database only so that no shared one is flushed.
        stack = start_stack(url, redis_db(RedisDb.SCRATCH), tmp_path / "logs",
                            CAIRN_REDIS_URL=redis.url)
        try:
            yield stack, redis
        finally:
            stop_stack(stack)
            redis.stop()


def backup(stack: Stack, volume: str, **body: object) -> str:
    response = stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{volume}", **body})
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def test_worker_takes_jobs_again_after_losing_redis_mid_job(
        outage_stack: tuple[Stack, RedisServer], volumes_pool: rados.Ioctx) -> None:
    stack, redis = outage_stack
    with ceph.dense_image(volumes_pool, "outage", 32 * MiB, seed=11) as slow, \
            ceph.dense_image(volumes_pool, "after", 8 * MiB, seed=12) as later:
        job_id = backup(stack, slow, qos_bytes_per_second=4 * MiB)   # ~8 s of copying
        deadline = time.monotonic() + 30
        while stack.get(f"/v1/jobs/{job_id}").json()["progress"]["bytes_done"] == 0:
            assert time.monotonic() < deadline, "the backup never got going"
            time.sleep(0.05)
        redis.stop()
        time.sleep(4)
        redis.start()   # empty: the job's message is gone with the old server

        job = stack.wait_job(job_id, timeout=120)
        assert job["status"] == "succeeded", job
        assert stack.get(f"/v1/restore-points/{job['restore_point_id']}").json()["status"] \
            == "available"
        assert stack.worker.proc is not None
        assert stack.worker.proc.poll() is None, f"cairn-worker exited; see {stack.worker.log}"

        next_job = stack.wait_job(backup(stack, later), timeout=60)
        assert next_job["status"] == "succeeded", next_job
        assert stack.worker.proc.poll() is None
