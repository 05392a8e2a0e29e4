"""Redis (the broker and the slot leases) stopped for 60 s while slots fall due, then
started empty: every job runs, none twice. Real cairn-scheduler and cairn-worker on a Redis
of the test's own, a PostgreSQL database of its own, real Ceph volumes, a file clock."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import rados
from redis import Redis

from services.clock import set_file_clock
from services.db import Database
from services.records.restore_points import RestorePoint
from services.status import JobKind, JobStatus, RestorePointStatus
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.databases import migrated_database
from tests.support.factories import jobs_of, make_plan
from tests.support.redis_server import RedisServer
from tests.support.stack import BIN, Process, service_env

pytestmark = pytest.mark.ceph

OUTAGE_SECONDS = 60
HOURLY = [{"kind": "incremental", "cron": "0 * * * *"}]
T0 = datetime(2026, 11, 20, 0, 30, tzinfo=UTC)


@pytest.fixture
def own_database(tmp_path: Path) -> Iterator[str]:
    with migrated_database("postgresql", tmp_path) as url:
        yield url


def settle_startup_prunes(db: Database, plans: list[str], redis: RedisServer) -> None:
    """Wait for the prunes cairn-scheduler sends on its first tick to finish, so the outage
    starts with no task in the worker's hands and the test stays about slots falling due
    while Redis is down (a job in the worker's hands at that moment is
    tests/integration/worker/test_broker_outage.py's subject)."""
    broker = Redis.from_url(redis.url, socket_timeout=5)
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            prunes = [j for p in plans for j in jobs_of(db, p, JobKind.PRUNE)]
            # The worker acks a task after its job has ended: until then kombu keeps the
            # message in its `unacked` hash.
            if prunes and all(j.status in (JobStatus.SUCCEEDED, JobStatus.SKIPPED,
                                           JobStatus.FAILED) for j in prunes) \
                    and broker.hlen("unacked") == 0:
                return
            time.sleep(0.1)
    finally:
        broker.close()


def test_jobs_due_during_a_redis_outage_all_run_once(
        own_database: str, tmp_path: Path, volumes_pool: rados.Ioctx,
        images: list[str]) -> None:
    for i in range(3):
        name = ceph.unique_name("outage")
        ceph.make_mixed_image(volumes_pool, name, size=20 * MiB, seed=300 + i)
        images.append(name)
    clock = tmp_path / "clock"
    set_file_clock(clock, T0)
    db = Database(own_database)
    plans = [make_plan(db, project="project-o", volumes=images[:2], rules=HOURLY, now=T0),
             make_plan(db, project="project-o", volumes=images[2:], rules=HOURLY, now=T0)]

    redis = RedisServer(tmp_path)
    redis.start()
    env = service_env(own_database, 0, CAIRN_REDIS_URL=redis.url,
                      CAIRN_CLOCK_FILE=str(clock), CAIRN_MISFIRE_GRACE_SECONDS="5400")
    worker = Process("cairn-worker", [str(BIN / "cairn-worker")], env, tmp_path / "worker.log")
    scheduler = Process("cairn-scheduler", [str(BIN / "cairn-scheduler")], env,
                        tmp_path / "scheduler.log")
    try:
        worker.start("ready")
        scheduler.start("cairn-scheduler started")
        settle_startup_prunes(db, plans, redis)
        redis.stop()
        down_at = time.monotonic()
        set_file_clock(clock, datetime(2026, 11, 20, 1, 0, 5, tzinfo=UTC))  # slots fall due
        deadline = time.monotonic() + 20
        while sum(len(jobs_of(db, p)) for p in plans) < 3:
            assert time.monotonic() < deadline, "the scheduler made no jobs while Redis was down"
            time.sleep(0.2)
        assert all(j.status == JobStatus.QUEUED for p in plans for j in jobs_of(db, p))
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))
        redis.start()   # empty: every message and lease of before is gone

        deadline = time.monotonic() + 180
        while not all(j.status == JobStatus.SUCCEEDED for p in plans for j in jobs_of(db, p)):
            failed = [j for p in plans for j in jobs_of(db, p)
                      if j.status not in (JobStatus.QUEUED, JobStatus.RUNNING,
                                          JobStatus.SUCCEEDED)]
            assert not failed, [(j.status, j.error_message) for j in failed]
            assert time.monotonic() < deadline, (
                f"jobs did not all run after Redis came back; logs in {tmp_path}")
            time.sleep(0.5)
        jobs = [j for p in plans for j in jobs_of(db, p)]
        assert len(jobs) == 3
        assert [j.attempt for j in jobs] == [1, 1, 1]   # none ran twice
        with db.session() as session:
            points = session.query(RestorePoint).filter(
                RestorePoint.plan_id.in_(plans)).all()
            assert sorted(p.status for p in points) == [RestorePointStatus.AVAILABLE] * 3
            assert {p.id for p in points} == {j.restore_point_id for j in jobs}
    finally:
        scheduler.stop()
        worker.stop()
        redis.stop()
        db.dispose()
