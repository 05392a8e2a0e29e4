"""Admission applies the start rule before it sends: a scheduled job that waited for a slot
past the end of its plan's backup window is not sent (for the worker's claim to hand back)
but told to wait for the window's next opening, and sent then. On SQLite, with the
broker and Redis's slots stood in for: admission's decisions are what is under test (its
fair share on the real Redis and both databases: tests/integration/services/scheduler/)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.db import Database
from services.jobs import factory
from services.limits.leases import Scope
from services.records.jobs import Job
from services.records.plans import Plan, StoredRule
from services.records.volumes import Volume
from services.scheduler.admission import Admission
from services.settings import Settings
from services.status import JobKind, RestorePointKind

SLOT = datetime(2026, 11, 20, 21, 0, tzinfo=UTC)          # 22:00 in Berlin
WINDOW_CLOSED = datetime(2026, 11, 21, 6, 30, tzinfo=UTC)  # 07:30 in Berlin
NEXT_OPENING = datetime(2026, 11, 21, 21, 0, tzinfo=UTC)


class Slots:
    """Stands in for the leases in Redis: every slot is free but those of `full` scopes."""

    def __init__(self) -> None:
        self.full: set[str] = set()
        self.asked: list[str] = []

    def acquire_many(self, requests: list[tuple[str, list[Scope]]]) -> list[Scope | None]:
        self.asked += [job_id for job_id, _ in requests]
        return [next((s for s in scopes if s.key in self.full), None) for _, scopes in requests]

    def release(self, job_id: str, scopes: list[Scope]) -> None:
        pass


class Broker:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_many(self, jobs: list[tuple[str, JobKind]]) -> list[str]:
        self.sent += [job_id for job_id, _ in jobs]
        return [job_id for job_id, _ in jobs]


@pytest.fixture
def slots() -> Slots:
    return Slots()


@pytest.fixture
def broker() -> Broker:
    return Broker()


@pytest.fixture
def admission(db: Database, slots: Slots, broker: Broker) -> Admission:
    settings = Settings(auth_strategy="noauth", environment="development")
    with db.session() as session:
        session.add(Plan(id="nightly", project_id="p1", name="nightly", target="ceph-a",
                         timezone="Europe/Berlin", window_start="22:00", window_end="06:00",
                         rules=[StoredRule(cron="0 22 * * *")], retention={},
                         created_at=SLOT, updated_at=SLOT))
        for volume in ("v1", "v2", "v3"):
            session.add(Volume(id=volume, project_id="p1", cluster="ceph-a", pool="volumes",
                               image=f"img-{volume}", created_at=SLOT))
    return Admission(db, slots, broker, settings)  # type: ignore[arg-type]


def _backup(db: Database, volume: str, *, scheduled: bool = True, attempt: int = 0) -> str:
    values = factory.backup(project_id="p1", volume_id=volume, target="ceph-a",
                            kind=RestorePointKind.INCREMENTAL, max_attempts=3,
                            plan_id="nightly", slot_at=SLOT if scheduled else None,
                            not_before=SLOT if scheduled else None, now=SLOT)
    with db.session() as session:
        job = Job(**values)
        job.attempt = attempt
        session.add(job)
        return job.id


def _job(db: Database, job_id: str) -> Job:
    with db.session() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def test_a_job_outside_its_window_is_not_sent_and_waits_for_the_next_opening(
        db: Database, admission: Admission, slots: Slots, broker: Broker) -> None:
    waited_too_long = _backup(db, "v1")
    run_now = _backup(db, "v2", scheduled=False)  # run-now jobs are not bound to the window
    result = admission.admit(WINDOW_CLOSED)
    assert broker.sent == [run_now]
    assert result.deferred == 1
    assert waited_too_long not in slots.asked  # it took no slot another job could use
    job = _job(db, waited_too_long)
    assert job.sent_at is None
    assert job.not_before == NEXT_OPENING
    # Not looked at again before the window opens; sent when it does.
    assert admission.admit(NEXT_OPENING - timedelta(minutes=1)).sent == []
    assert admission.admit(NEXT_OPENING).sent == [waited_too_long]


def test_a_retry_outside_the_window_is_sent(db: Database, admission: Admission) -> None:
    """A job that started runs to its end: its retry after a crash is not held back."""
    retry = _backup(db, "v1", attempt=1)
    assert admission.admit(WINDOW_CLOSED).sent == [retry]


def test_a_job_without_a_free_slot_waits_unsent_and_keeps_its_not_before(
        db: Database, admission: Admission, slots: Slots) -> None:
    slots.full.add("cairn:slots:target:ceph-a")
    inside = SLOT + timedelta(hours=1)
    waiting = _backup(db, "v1")
    result = admission.admit(inside)
    assert (result.sent, result.waiting, result.deferred) == ([], 1, 0)
    job = _job(db, waiting)
    assert (job.sent_at, job.not_before) == (None, SLOT)
