"""The worker's one limits watch (on a real SQLite): every running job of the process hears
of its new QoS limits and of a cancel request, from one query; a job that ended is no longer
read."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from sqlalchemy import update

from services.db import Database
from services.jobs import factory
from services.records.jobs import Job
from services.records.volumes import Volume
from services.status import RestorePointKind
from worker.managers.limits_watch import POLL_SECONDS, LimitsWatch

NOW = datetime(2026, 11, 26, 4, 0, tzinfo=UTC)


class Reporter:
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.heard: list[tuple[int | None, int | None, datetime | None]] = []
        self.changed = threading.Event()

    def follow_limits(self, bps: int | None, iops: int | None,
                      cancel_at: datetime | None) -> None:
        self.heard.append((bps, iops, cancel_at))
        self.changed.set()


def _jobs(db: Database, n: int) -> list[str]:
    with db.session() as session:
        ids = []
        for i in range(n):
            session.add(Volume(id=f"v{i}", project_id="p", cluster="ceph-a", pool="volumes",
                               image=f"img{i}", created_at=NOW))
            session.flush()
            job = Job(**factory.backup(project_id="p", volume_id=f"v{i}", target="local",
                                       kind=RestorePointKind.INCREMENTAL, max_attempts=3,
                                       qos=factory.Qos(bytes_per_second=1 << 20), now=NOW))
            session.add(job)
            session.flush()
            ids.append(job.id)
    return ids


def test_each_job_hears_its_own_limits_and_cancel(db: Database) -> None:
    first, second = _jobs(db, 2)
    watch = LimitsWatch(db)
    a, b = Reporter(first), Reporter(second)
    watch.poll({first: a, second: b})
    assert a.heard == [(1 << 20, None, None)]
    assert b.heard == [(1 << 20, None, None)]

    with db.session() as session:
        session.execute(update(Job).where(Job.id == first)
                        .values(qos_bytes_per_second=None, qos_ops_per_second=50))
        session.execute(update(Job).where(Job.id == second).values(cancel_requested_at=NOW))
    watch.poll({first: a, second: b})
    assert a.heard[-1] == (None, 50, None)
    bps, iops, cancel_at = b.heard[-1]
    assert (bps, iops) == (1 << 20, None)
    assert cancel_at is not None


def test_the_thread_reads_running_jobs_only(db: Database) -> None:
    first, second = _jobs(db, 2)
    watch = LimitsWatch(db)
    a, b = Reporter(first), Reporter(second)
    watch.add(a)
    watch.add(b)
    assert a.changed.wait(20 * POLL_SECONDS)
    assert b.changed.wait(20 * POLL_SECONDS)
    watch.remove(b)
    # A reporter of an earlier attempt with the same id does not take the job out.
    watch.remove(Reporter(first))
    # Each poll hears `a` once and polls run one after another: two polls on, any poll
    # begun before the removal has ended.
    _polls(a, 2)
    heard_b = len(b.heard)
    _polls(a, 2)
    assert len(b.heard) == heard_b
    watch.remove(a)


def _polls(reporter: Reporter, n: int) -> None:
    for _ in range(n):
        reporter.changed.clear()
        assert reporter.changed.wait(20 * POLL_SECONDS)
