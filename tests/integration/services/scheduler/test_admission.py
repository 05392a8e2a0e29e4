"""Admission on a real database and the real Redis: jobs start round-robin across projects
(fair share), jobs over a limit wait without being sent, one project never takes every
slot of a target another project waits for whatever the limits say, yet uses them all when
nobody else asks, a restore goes before its project's backups, copies wait for slots like
backups, and a job not yet due waits."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from redis import Redis
from sqlalchemy import update

from services.base import utcnow
from services.db import Database
from services.limits.leases import Leases, Scope, scopes_for
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


# This worker's scratch Redis database, never flushed: every key a test takes names its
# own random targets and projects, and expires by itself (a lease's key lives twice the
# lease), so the tests beside it are untouched.
@pytest.fixture
def redis() -> Iterator[Redis]:
    client = Redis.from_url(f"redis://127.0.0.1:{REDIS_PORT}/{redis_db(RedisDb.SCRATCH)}")
    yield client
    client.close()


def add_jobs(db: Database, project: str, count: int, target: str,
             kind: JobKind = JobKind.BACKUP) -> list[str]:
    with db.session() as session:
        jobs = [Job(project_id=project, kind=kind, target=target,
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
    settings = Settings(auth_strategy="noauth", environment="development",
                        max_jobs_per_target=3, max_jobs_per_project=100)
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


def test_one_project_never_holds_every_slot_of_a_target_another_waits_for(
        fresh_database_url: str, redis: Redis) -> None:
    # A project limit far above the target's (an operator's mistake, or a target's own
    # max_jobs below it): while another project waits, the project leaves it a slot.
    shared, alone = f"t-{uuid.uuid4().hex[:6]}", f"t-{uuid.uuid4().hex[:6]}"
    settings = Settings(auth_strategy="noauth", environment="development",
                        max_jobs_per_target=3, max_jobs_per_project=100,
                        clusters={"ceph-a": {"conf": "/etc/ceph/ceph.conf"}},  # type: ignore[dict-item]
                        backup_targets={alone: {"cluster": "ceph-a", "pool": "p",  # type: ignore[dict-item]
                                                "max_jobs": 1}})
    db = Database(fresh_database_url)
    admission = Admission(db, Leases(redis, 60), RecordingDispatcher(), settings)  # type: ignore[arg-type]
    big = add_jobs(db, f"big-{uuid.uuid4().hex[:6]}", 10, shared)
    other = add_jobs(db, f"other-{uuid.uuid4().hex[:6]}", 3, shared)
    sent = admission.admit(utcnow()).sent
    assert sorted(sent) == sorted([*big[:2], other[0]])  # the third slot went to `other`
    # A target with one slot has nothing to share: it goes to one project at a time.
    solo = add_jobs(db, f"solo-{uuid.uuid4().hex[:6]}", 2, alone)
    assert admission.admit(utcnow()).sent == solo[:1]
    db.dispose()


def test_a_project_alone_on_a_target_uses_every_slot(fresh_database_url: str,
                                                     redis: Redis) -> None:
    # Keeping a slot for others while nobody else asks for one only leaves it idle. A slot
    # taken is kept until its job ends: a project that comes later gets the first to free.
    target = f"t-{uuid.uuid4().hex[:6]}"
    settings = Settings(auth_strategy="noauth", environment="development",
                        max_jobs_per_target=3, max_jobs_per_project=100)
    db = Database(fresh_database_url)
    leases = Leases(redis, 60)
    admission = Admission(db, leases, RecordingDispatcher(), settings)  # type: ignore[arg-type]
    big = add_jobs(db, f"big-{uuid.uuid4().hex[:6]}", 10, target)
    assert admission.admit(utcnow()).sent == big[:3]
    late = add_jobs(db, f"late-{uuid.uuid4().hex[:6]}", 3, target)
    assert admission.admit(utcnow()).sent == []  # every slot is taken
    finish(db, leases, settings, big[:1])
    # The freed slot goes to the project that waited, and the big one may not take the
    # last free slot again while it waits.
    assert admission.admit(utcnow()).sent == late[:1]
    finish(db, leases, settings, big[1:2])
    sent = admission.admit(utcnow()).sent
    assert len(sent) == 1, sent
    db.dispose()


def test_a_restore_goes_before_its_projects_backups(fresh_database_url: str,
                                                    redis: Redis) -> None:
    # A tenant who lost data does not wait behind its own nightly run.
    target = f"t-{uuid.uuid4().hex[:6]}"
    settings = Settings(auth_strategy="noauth", environment="development",
                        max_jobs_per_target=4, max_jobs_per_project=1)
    db = Database(fresh_database_url)
    leases = Leases(redis, 60)
    admission = Admission(db, leases, RecordingDispatcher(), settings)  # type: ignore[arg-type]
    project = f"p-{uuid.uuid4().hex[:6]}"
    backups = add_jobs(db, project, 50, target)
    assert admission.admit(utcnow()).sent == backups[:1]
    (restore,) = add_jobs(db, project, 1, target, kind=JobKind.RESTORE)
    finish(db, leases, settings, backups[:1])
    assert admission.admit(utcnow()).sent == [restore]
    db.dispose()


def test_copies_wait_for_slots_like_backups(fresh_database_url: str, redis: Redis) -> None:
    target = f"t-{uuid.uuid4().hex[:6]}"
    settings = Settings(auth_strategy="noauth", environment="development",
                        max_jobs_per_target=4, max_jobs_per_project=2)
    db = Database(fresh_database_url)
    leases = Leases(redis, 60)
    admission = Admission(db, leases, RecordingDispatcher(), settings)  # type: ignore[arg-type]
    project = f"p-{uuid.uuid4().hex[:6]}"
    copies = add_jobs(db, project, 5, target, kind=JobKind.COPY)
    assert admission.admit(utcnow()).sent == copies[:2]  # the project's limit
    assert all(copies[0] in leases.holders(scope)
               for scope in scopes_for(settings, JobKind.COPY, project, target))
    db.dispose()


def test_a_job_not_yet_due_is_not_started(fresh_database_url: str, redis: Redis) -> None:
    settings = Settings(auth_strategy="noauth", environment="development")
    db = Database(fresh_database_url)
    dispatcher = RecordingDispatcher()
    admission = Admission(db, Leases(redis, 60), dispatcher, settings)  # type: ignore[arg-type]
    (job,) = add_jobs(db, f"p-{uuid.uuid4().hex[:6]}", 1, f"t-{uuid.uuid4().hex[:6]}")
    with db.session() as session:
        session.execute(update(Job).where(Job.id == job)
                        .values(not_before=utcnow() + timedelta(hours=1)))
    assert job not in admission.admit(utcnow()).sent
    assert job in admission.admit(utcnow() + timedelta(hours=2)).sent
    assert dispatcher.sent.count(job) == 1
    assert job not in admission.admit(utcnow() + timedelta(hours=2)).sent  # sent once
    db.dispose()


def test_a_job_two_admitters_race_for_is_sent_once(fresh_database_url: str,
                                                   redis: Redis) -> None:
    """Two admitters (two schedulers, or the API's hook and a scheduler) that both picked
    the same queued job: the one that marks it sent second hands nothing to the broker."""
    settings = Settings(auth_strategy="noauth", environment="development")
    db = Database(fresh_database_url)
    first, second = RecordingDispatcher(), RecordingDispatcher()
    early = Admission(db, Leases(redis, 60), first, settings)  # type: ignore[arg-type]

    class Overtaken(Leases):
        """The later admitter's leases: the other admitter runs to its end between this
        one's choice of candidates and its marking them sent."""

        def acquire_many(self, requests: list[tuple[str, list[Scope]]]) -> list[Scope | None]:
            assert early.admit(utcnow()).sent
            return super().acquire_many(requests)

    late = Admission(db, Overtaken(redis, 60), second, settings)  # type: ignore[arg-type]
    (job,) = add_jobs(db, f"p-{uuid.uuid4().hex[:6]}", 1, f"t-{uuid.uuid4().hex[:6]}")
    late.admit(utcnow())
    assert first.sent == [job]
    assert second.sent == [], "a job another admitter had sent was handed to the broker again"
    db.dispose()
