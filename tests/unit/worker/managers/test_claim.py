"""The worker's claim asserts the start rule again when a job arrives, since time passed
after admission sent it: a job whose window closed meanwhile, or whose slots were lost,
goes back to admission with what it waits for, and one that may start becomes running
(one winner: the guarded update). On SQLite, with Redis's slots stood in for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.db import Database
from services.jobs import factory
from services.limits.leases import Scope
from services.records.jobs import Job
from services.records.plans import Plan, StoredRule
from services.records.volumes import Volume
from services.settings import Settings
from services.status import JobStatus, RestorePointKind
from worker.managers.claim import claim
from worker.runtime import Runtime

SLOT = datetime(2026, 11, 20, 21, 0, tzinfo=UTC)          # 22:00 in Berlin
WINDOW_CLOSED = datetime(2026, 11, 21, 6, 30, tzinfo=UTC)  # 07:30 in Berlin


class Slots:
    """Stands in for the leases in Redis: every slot is free but those of `full` scopes."""

    def __init__(self) -> None:
        self.full: set[str] = set()
        self.held: dict[str, list[Scope]] = {}

    def acquire(self, job_id: str, scopes: list[Scope]) -> Scope | None:
        blocked = next((s for s in scopes if s.key in self.full), None)
        if blocked is None:
            self.held[job_id] = scopes
        return blocked

    def release(self, job_id: str, scopes: list[Scope]) -> None:
        self.held.pop(job_id, None)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def slots() -> Slots:
    return Slots()


@pytest.fixture
def clock() -> Clock:
    return Clock(SLOT)


@pytest.fixture
def rt(db: Database, slots: Slots, clock: Clock) -> Runtime:
    settings = Settings(auth_strategy="noauth", environment="development")
    with db.session() as session:
        session.add(Plan(id="nightly", project_id="p1", name="nightly", target="ceph-a",
                         timezone="Europe/Berlin", window_start="22:00", window_end="06:00",
                         rules=[StoredRule(cron="0 22 * * *")], retention={},
                         created_at=SLOT, updated_at=SLOT))
        session.add(Volume(id="v1", project_id="p1", cluster="ceph-a", pool="volumes",
                           image="img-v1", created_at=SLOT))
    return Runtime(settings, db, None, "worker-1", slots, clock)  # type: ignore[arg-type]


def _sent_backup(db: Database) -> str:
    values = factory.backup(project_id="p1", volume_id="v1", target="ceph-a",
                            kind=RestorePointKind.INCREMENTAL, max_attempts=3,
                            plan_id="nightly", slot_at=SLOT, not_before=SLOT, now=SLOT)
    with db.session() as session:
        job = Job(**values)
        job.sent_at = SLOT
        session.add(job)
        return job.id


def _job(db: Database, job_id: str) -> Job:
    with db.session() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def test_a_job_whose_window_closed_after_it_was_sent_goes_back_to_wait_for_the_opening(
        db: Database, rt: Runtime, slots: Slots, clock: Clock) -> None:
    job_id = _sent_backup(db)
    clock.now = WINDOW_CLOSED
    assert claim(rt, job_id) is None
    job = _job(db, job_id)
    assert (job.status, job.sent_at, job.attempt) == (JobStatus.QUEUED, None, 0)
    assert job.not_before == datetime(2026, 11, 21, 21, 0, tzinfo=UTC)
    assert job_id not in slots.held


def test_a_job_that_lost_its_slots_goes_back_keeping_its_not_before(
        db: Database, rt: Runtime, slots: Slots, clock: Clock) -> None:
    job_id = _sent_backup(db)
    clock.now = SLOT + timedelta(minutes=1)
    slots.full.add("cairn:slots:target:ceph-a")
    assert claim(rt, job_id) is None
    job = _job(db, job_id)
    assert (job.status, job.sent_at, job.not_before) == (JobStatus.QUEUED, None, SLOT)


def test_a_job_the_rule_lets_start_is_claimed_once(db: Database, rt: Runtime,
                                                    slots: Slots, clock: Clock) -> None:
    job_id = _sent_backup(db)
    clock.now = SLOT + timedelta(minutes=1)
    claimed = claim(rt, job_id)
    assert claimed is not None
    assert claimed.attempt == 1
    assert claimed.restore_point_id is not None  # a scheduled backup's, made as it starts
    assert _job(db, job_id).status == JobStatus.RUNNING
    assert job_id in slots.held
    assert claim(rt, job_id) is None  # a duplicate delivery finds nothing to do
