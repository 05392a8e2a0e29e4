"""The scheduler's slot logic on a real database (SQLite and PostgreSQL) with a clock the
test controls: each slot once, misfires, the backup window, busy volumes, quotas."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update

from services.db import Database
from services.quotas import service as quotas
from services.records.groups import RestorePointGroup
from services.records.jobs import Job
from services.records.webhooks import EventDelivery, Webhook
from services.scheduler.planner import schedule_due
from services.settings import Settings
from services.status import Consistency, JobKind, JobStatus
from tests.support.factories import duplicate_slots, jobs_of, make_plan

# The planner's claims (FOR UPDATE SKIP LOCKED on PostgreSQL, INSERT .. ON CONFLICT on both)
# differ between the databases.
pytestmark = pytest.mark.both_databases

T0 = datetime(2026, 11, 20, 0, 30, tzinfo=UTC)
HOURLY = [{"kind": "incremental", "cron": "0 * * * *"}]


@pytest.fixture
def db(fresh_database_url: str) -> Iterator[Database]:
    database = Database(fresh_database_url)
    yield database
    database.dispose()


def settings(**values: object) -> Settings:
    return Settings(auth_strategy="noauth", environment="development",
                    misfire_grace_seconds=5400, **values)  # type: ignore[arg-type]


def project() -> str:
    return f"p-{uuid.uuid4().hex[:8]}"


def test_each_due_slot_makes_one_job_per_volume_once(db: Database) -> None:
    plan = make_plan(db, project=project(), volumes=3, rules=HOURLY, now=T0)
    schedule_due(db, settings(), T0 + timedelta(minutes=31))           # 01:00 is due
    schedule_due(db, settings(), T0 + timedelta(minutes=45))           # nothing new
    jobs = jobs_of(db, plan)
    assert [(j.slot_at, j.status) for j in jobs] == [
        (datetime(2026, 11, 20, 1, 0, tzinfo=UTC), JobStatus.QUEUED)] * 3
    assert {j.kind for j in jobs} == {JobKind.BACKUP}
    assert duplicate_slots(db) == 0


def test_missed_slots_older_than_grace_are_skipped_and_only_the_newest_runs(
        db: Database) -> None:
    plan = make_plan(db, project=project(), volumes=1, rules=HOURLY, now=T0)
    # The scheduler was down from 00:30 until 05:10: slots 01:00 ... 05:00 are due at once.
    schedule_due(db, settings(), datetime(2026, 11, 20, 5, 10, tzinfo=UTC))
    got = [(j.slot_at.hour if j.slot_at else None, j.status, j.error_code)
           for j in jobs_of(db, plan)]
    assert got == [
        (1, JobStatus.SKIPPED, "misfire"),       # missed by 4 h 10 min > grace 1 h 30
        (2, JobStatus.SKIPPED, "misfire"),
        (3, JobStatus.SKIPPED, "misfire"),       # missed by 2 h 10 min
        (4, JobStatus.SKIPPED, "superseded"),    # within grace, but 05:00 is newer
        (5, JobStatus.QUEUED, None),             # runs late, once
    ]


def test_a_full_among_superseded_slots_makes_the_late_run_a_full(db: Database) -> None:
    rules = [{"kind": "incremental", "cron": "0 * * * *"}, {"kind": "full", "cron": "0 4 * * *"}]
    plan = make_plan(db, project=project(), volumes=1, rules=rules, now=T0)
    schedule_due(db, settings(), datetime(2026, 11, 20, 5, 10, tzinfo=UTC))
    run = [j for j in jobs_of(db, plan) if j.status == JobStatus.QUEUED]
    assert [(j.slot_at.hour if j.slot_at else None, j.backup_kind) for j in run] == [
        (5, "full")]


def test_a_slot_outside_the_window_waits_for_its_opening(db: Database) -> None:
    rules = [{"kind": "incremental", "cron": "0 20 * * *", "timezone": "Europe/Berlin"}]
    plan = make_plan(db, project=project(), volumes=1, rules=rules, now=T0,
                     timezone="Europe/Berlin", window=("22:00", "06:00"))
    schedule_due(db, settings(), datetime(2026, 11, 20, 19, 1, tzinfo=UTC))  # 20:01 Berlin
    (job,) = jobs_of(db, plan)
    assert job.slot_at == datetime(2026, 11, 20, 19, 0, tzinfo=UTC)
    assert job.not_before == datetime(2026, 11, 20, 21, 0, tzinfo=UTC)   # 22:00 Berlin


def test_a_busy_volume_skips_the_slot_and_over_quota_fails_it(db: Database) -> None:
    owner = project()
    plan = make_plan(db, project=owner, volumes=1, rules=HOURLY, now=T0)
    with db.session() as session:
        webhook = Webhook(project_id=owner, url="https://hooks.example.net/cairn",
                          event_types=json.dumps(["backup.create.error"]), sealed_secrets="")
        session.add(webhook)
        session.flush()
        hook = webhook.id
    schedule_due(db, settings(), datetime(2026, 11, 20, 1, 1, tzinfo=UTC))
    schedule_due(db, settings(), datetime(2026, 11, 20, 2, 1, tzinfo=UTC))   # 01:00 still queued
    with db.session() as session:
        quotas.set_limits(session, owner, restore_points=0, max_bytes=None)
        session.query(Job).filter(Job.plan_id == plan, Job.status == JobStatus.QUEUED).update(
            {"status": JobStatus.SUCCEEDED})
    schedule_due(db, settings(), datetime(2026, 11, 20, 3, 1, tzinfo=UTC))
    got = [(j.slot_at.hour if j.slot_at else None, j.status, j.error_code)
           for j in jobs_of(db, plan)]
    assert got[1] == (2, JobStatus.SKIPPED, "volume_busy")
    assert got[2] == (3, JobStatus.FAILED, "quota_exceeded")
    (failed,) = [j for j in jobs_of(db, plan) if j.status == JobStatus.FAILED]
    assert failed.error_message is not None
    assert "restore point quota" in failed.error_message
    assert "0 of 0 used, this needs 1 more (1 over)" in failed.error_message
    # Told as any failed backup is: the project's webhook hears of it.
    with db.session() as session:
        told = [json.loads(d.body) for d in session.scalars(
            select(EventDelivery).where(EventDelivery.webhook_id == hook))]
    assert [(e["type"], e["data"]["job_id"], e["data"]["error_code"]) for e in told] == [
        ("org.openstack.cairn.backup.create.error", failed.id, "quota_exceeded")]


def test_a_group_plans_run_shares_one_group_made_once(db: Database) -> None:
    """Every volume of a group plan's run belongs to the same group restore point, which
    two scheduler rounds (or replicas) planning the same slot make only once."""
    plan = make_plan(db, project=project(), volumes=3, rules=HOURLY, now=T0,
                     consistency=Consistency.GROUP)
    schedule_due(db, settings(), T0 + timedelta(minutes=31))
    schedule_due(db, settings(), T0 + timedelta(minutes=45))
    with db.session() as session:  # the run ended: the next slot's volumes are not busy
        session.execute(update(Job).where(Job.plan_id == plan)
                        .values(status=JobStatus.SUCCEEDED))
    schedule_due(db, settings(), T0 + timedelta(minutes=91))  # the next slot: a new group
    jobs = jobs_of(db, plan)
    by_slot: dict[datetime | None, set[str | None]] = {}
    for job in jobs:
        by_slot.setdefault(job.slot_at, set()).add(job.group_id)
    assert len(by_slot) == 2
    assert all(len(ids) == 1 and None not in ids for ids in by_slot.values())
    with db.session() as session:
        groups = session.scalars(select(RestorePointGroup)
                                 .where(RestorePointGroup.plan_id == plan)).all()
        assert sorted(g.id for g in groups) == sorted(
            next(iter(ids)) for ids in by_slot.values())
