"""A job's end hands its concurrency slot to the next queued job at once: with one slot
per target and a scheduler that comes round only every 30 s, three backups still run one
right after the other. Before, each waited for the scheduler's next round (a second in
production, per wave of a plan's jobs)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import start_backup
from tests.support.rounds import metrics_port, until_rounds
from tests.support.stack import Stack, start_stack, stop_stack
from tests.support.workers import RedisDb, redis_db

pytestmark = pytest.mark.ceph

REDIS_DB = redis_db(RedisDb.SCRATCH)


@pytest.fixture
def slow_scheduler_stack(fresh_database_url: str, tmp_path: Path) -> Iterator[Stack]:
    stack = start_stack(fresh_database_url, REDIS_DB, tmp_path / "logs",
                        CAIRN_SCHEDULER_TICK_SECONDS="30", CAIRN_MAX_JOBS_PER_TARGET="1")
    yield stack
    stop_stack(stack)


def test_a_freed_slot_starts_the_next_job_without_the_scheduler(
        slow_scheduler_stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    stack = slow_scheduler_stack
    names = [ceph.random_image(volumes_pool, "handon", 3 * MiB + 5, seed=91 + i)
             for i in range(3)]
    images.extend(names)
    until_rounds(metrics_port(stack.env), 1)  # past its first round, which runs at its start
    started = time.monotonic()
    ids = [start_backup(stack, name)["id"] for name in names]
    jobs = [stack.wait_job(job_id, timeout=25) for job_id in ids]
    took = time.monotonic() - started
    assert all(job["status"] == "succeeded" for job in jobs), jobs
    waits = sorted(job["timings"]["phases"]["queue_wait"] for job in jobs)
    # The API started the first; the worker each of the others as the one before ended.
    assert took < 15.0, (took, waits)
    assert waits[-1] < 10.0, waits
