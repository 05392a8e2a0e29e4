"""Admission on a real database and the real Redis: jobs start round-robin across projects
(fair share), jobs over a limit wait without being sent, and a job not yet due waits."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from redis import Redis
from sqlalchemy import update

from services.base import utcnow
from services.db import Database
from services.limits.leases import Leases, scopes_for
from services.records.jobs import Job
from services.scheduler.admission import Admission
from services.settings import Settings
from services.status import JobKind, JobStatus
from tests.support.stack import REDIS_PORT
from tests.support.workers import RedisDb, redis_db

# Admission's queries and guarded updates, on each database.
pytestmark = pytest.mark.both_databases


class RecordingDispatcher:
    """Stands in for the broker: admission's decisions are what is under test."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_many(self, jobs: list[tuple[str, JobKind]]) -> list[str]:
        self.sent += [job_id for job_id, _ in jobs]
        return [job_id for job_id, _ in jobs]


@pytest.fixture
def redis() -> Iterator[Redis]:
    client = Redis.from_url(f"redis://127.0.0.1:{REDIS_PORT}/{redis_db(RedisDb.SCRATCH)}")
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


def add_jobs(db: Database, project: str, count: int, target: str) -> list[str]:
    with db.session() as session:
        jobs = [Job(project_id=project, kind=JobKind.BACKUP, target=target,
                    queued_at=utcnow() + timedelta(milliseconds=i)) for i in range(count)]
        session.add_all(jobs)
        session.flush()
        return [j.id for j in jobs]


def finish(db: Database, leases: Leases, settings: Settings, job_ids: list[str]) -> None:
    with db.session() as session:
        for job_id in job_ids:
            job = session.get(Job, job_id)
            assert job is not None
            leases.release(job_id, scopes_for(settings, JobKind.BACKUP, job.project_id,
                                              job.target))
        session.execute(update(Job).where(Job.id.in_(job_ids))
                        .values(status=JobStatus.SUCCEEDED))


def test_small_project_is_not_starved_by_a_big_one(fresh_database_url: str, redis: Redis) -> None:
    target = f"t-{uuid.uuid4().hex[:6]}"
    settings = Settings(max_jobs_per_target=3, max_jobs_per_project=100)
    db = Database(fresh_database_url)
    leases = Leases(redis, lease_seconds=60)
    dispatcher = RecordingDispatcher()
    admission = Admission(db, leases, dispatcher, settings)  # type: ignore[arg-type]
    add_jobs(db, f"big-{uuid.uuid4().hex[:6]}", 500, target)
    small = add_jobs(db, f"small-{uuid.uuid4().hex[:6]}", 5, target)

    # Three slots free at once: the round-robin gives each project one before either gets a
    # second, so every round starts one of the small project's jobs.
    rounds = []
    for _ in range(5):
        sent = admission.admit(utcnow()).sent
        assert len(sent) == 3  # the target's limit; the rest wait, unsent
        rounds.append(sent)
        finish(db, leases, settings, sent)
    assert [sum(j in small for j in r) for r in rounds] == [1, 1, 1, 1, 1]
    assert [j for r in rounds for j in r if j in small] == small

    # One slot frees at a time (steady state): it goes to the project with fewer jobs
    # under way, so the small project holds its share instead of waiting behind 500.
    more_small = add_jobs(db, f"small2-{uuid.uuid4().hex[:6]}", 3, target)
    running = admission.admit(utcnow()).sent        # big, small2, big
    assert sum(j in more_small for j in running) == 1
    finish(db, leases, settings, [j for j in running if j in more_small])
    # big has 2 under way, small2 none: small2's next job wins although big's are older.
    assert admission.admit(utcnow()).sent == [more_small[1]]
    db.dispose()


def test_a_job_not_yet_due_is_not_started(fresh_database_url: str, redis: Redis) -> None:
    settings = Settings()
    db = Database(fresh_database_url)
    dispatcher = RecordingDispatcher()
    admission = Admission(db, Leases(redis, 60), dispatcher, settings)  # type: ignore[arg-type]
    (job,) = add_jobs(db, f"p-{uuid.uuid4().hex[:6]}", 1, "local")
    with db.session() as session:
        session.execute(update(Job).where(Job.id == job)
                        .values(not_before=utcnow() + timedelta(hours=1)))
    assert job not in admission.admit(utcnow()).sent
    assert job in admission.admit(utcnow() + timedelta(hours=2)).sent
    assert dispatcher.sent.count(job) == 1
    assert job not in admission.admit(utcnow() + timedelta(hours=2)).sent  # sent once
    db.dispose()
