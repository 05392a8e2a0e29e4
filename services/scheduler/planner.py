"""Turning plans into jobs: every due slot of every enabled plan becomes one job per volume.

Exactly once, with any number of scheduler replicas: a job's (plan, volume, slot) is unique in
the database, so a second insert for the same slot is dropped; replicas on PostgreSQL also
split the due plans between them (FOR UPDATE SKIP LOCKED), and each plan's cursor
(`next_slot_at`) only moves forward by a guarded update.

Misfires (the scheduler was down): a slot missed by more than the grace period is recorded
as a `skipped` job (code `misfire`); of the slots still within the grace period only the
newest runs (the others are `skipped` as `superseded`: one late backup holds the newest
data, and it is a full if any of them was a full). A slot never runs in a burst.

A slot whose volume still has a backup queued or running is recorded `skipped`
(`volume_busy`): the job that is waiting takes its snapshot when it starts, so it already
holds the newest data. Over quota, the slot's jobs are recorded `failed` with the reason."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from services.db import Database
from services.jobs.inserts import insert_ignoring_conflicts, job_values
from services.jobs.models import Job
from services.plans import schedule, timing
from services.plans.models import Plan
from services.plans.prunes import request_prune
from services.quotas import service as quotas
from services.settings import Settings
from services.status import ACTIVE_JOB_STATUSES, JobKind, JobStatus, PlanStatus, RestorePointKind

log = logging.getLogger(__name__)

PLANS_PER_TRANSACTION = 100
SLOTS_PER_ROUND = 1000
"""Slots one plan materializes per round: a plan missed for a year catches up over a few
rounds instead of one huge transaction."""


@dataclass
class PlanResult:
    queued: int = 0
    skipped: int = 0
    failed: int = 0
    plans: int = 0


def schedule_due(db: Database, settings: Settings, now: datetime) -> PlanResult:
    total = PlanResult()
    grace = timedelta(seconds=settings.misfire_grace_seconds)
    # Each pass moves the plans it sees past `now` (or, catching up, by SLOTS_PER_ROUND
    # slots), so the loop ends; the bound only guards against a plan that cannot move.
    for _ in range(1000):
        with db.session() as session:
            stmt = (select(Plan).where(Plan.status == PlanStatus.ENABLED,
                                       Plan.next_slot_at <= now)
                    .order_by(Plan.next_slot_at).limit(PLANS_PER_TRANSACTION))
            if session.get_bind().dialect.name == "postgresql":
                stmt = stmt.with_for_update(skip_locked=True, of=Plan)
            plans = list(session.scalars(stmt))
            for plan in plans:
                _materialize(session, settings, plan, now, grace, total)
        if len(plans) < PLANS_PER_TRANSACTION:
            break
    return total


def _materialize(session: Session, settings: Settings, plan: Plan, now: datetime,
                 grace: timedelta, total: PlanResult) -> None:
    cursor = plan.next_slot_at
    assert cursor is not None
    due = schedule.slots(timing.rules_of(plan), cursor - timedelta(microseconds=1), until=now,
                         count=SLOTS_PER_ROUND)
    if due and len(due) == SLOTS_PER_ROUND:
        next_slot: datetime | None = due[-1].at + timedelta(microseconds=1)
    else:
        next_slot = timing.next_slot_after(plan, now)
    missed = [s for s in due if now - s.at > grace]
    late = [s for s in due if now - s.at <= grace]
    run = late[-1] if late else None
    superseded = late[:-1]
    rows: list[dict[str, Any]] = []
    volume_ids = [v.id for v in plan.volumes]
    common = {"project_id": plan.project_id, "kind": JobKind.BACKUP, "plan_id": plan.id,
              "target": plan.target, "qos_bytes_per_second": plan.qos_bytes_per_second,
              "qos_ops_per_second": plan.qos_ops_per_second,
              "max_attempts": settings.job_max_attempts}
    for volume_id in volume_ids:
        for slot in missed:
            rows.append(_ended(common, volume_id, slot, now, JobStatus.SKIPPED, "misfire",
                               f"missed: the scheduler was not running at "
                               f"{slot.at:%Y-%m-%d %H:%M} UTC and the slot is older than the "
                               f"grace period ({grace.total_seconds():.0f} s)"))
        for slot in superseded:
            rows.append(_ended(common, volume_id, slot, now, JobStatus.SKIPPED, "superseded",
                               "missed while the scheduler was down; the newest missed slot "
                               "within the grace period runs instead"))
    queued: list[tuple[str, datetime]] = []
    if run is not None and volume_ids:
        kind = (RestorePointKind.FULL if any(s.kind == RestorePointKind.FULL for s in late)
                else run.kind)
        window = timing.window_of(plan)
        not_before = window.next_open(run.at) if window else run.at
        over = quotas.shortfall(session, plan.project_id, len(volume_ids))
        busy = set(session.scalars(select(Job.volume_id).where(
            Job.volume_id.in_(volume_ids), Job.kind == JobKind.BACKUP,
            Job.status.in_(ACTIVE_JOB_STATUSES))))
        for volume_id in volume_ids:
            if over is not None:
                rows.append(_ended(common, volume_id, run, now, JobStatus.FAILED,
                                   "quota_exceeded", over))
            elif volume_id in busy:
                rows.append(_busy(common, volume_id, run, now))
            else:
                rows.append(job_values(**common, volume_id=volume_id, slot_at=run.at,
                                       backup_kind=kind, not_before=not_before,
                                       status=JobStatus.QUEUED, queued_at=now, created_at=now))
                queued.append((volume_id, run.at))
    insert_ignoring_conflicts(session, rows)
    if queued:
        _record_lost_races(session, common, plan.id, queued, now)
    moved = session.execute(
        update(Plan).where(Plan.id == plan.id, Plan.next_slot_at == cursor)
        .values(next_slot_at=next_slot))
    if getattr(moved, "rowcount", 0) == 1:
        total.plans += 1
        total.queued += len(queued)
        total.skipped += sum(1 for r in rows if r["status"] == JobStatus.SKIPPED)
        total.failed += sum(1 for r in rows if r["status"] == JobStatus.FAILED)


def _record_lost_races(session: Session, common: dict[str, Any], plan_id: str,
                       queued: list[tuple[str, datetime]], now: datetime) -> None:
    """A queued row dropped by the one-backup-per-volume index (an on-demand backup started
    between our check and our insert) leaves its slot without a job: record it skipped."""
    slot_at = queued[0][1]
    have = set(session.scalars(select(Job.volume_id).where(
        Job.plan_id == plan_id, Job.slot_at == slot_at,
        Job.volume_id.in_([v for v, _ in queued]))))
    lost = [v for v, _ in queued if v not in have]
    if lost:
        slot = schedule.Slot(slot_at, RestorePointKind.INCREMENTAL)
        insert_ignoring_conflicts(session, [_busy(common, v, slot, now) for v in lost])


def _busy(common: dict[str, Any], volume_id: str, slot: schedule.Slot,
          now: datetime) -> dict[str, Any]:
    return _ended(common, volume_id, slot, now, JobStatus.SKIPPED, "volume_busy",
                  "the volume's previous backup was still queued or running; it takes its "
                  "snapshot when it starts, so it holds the newest data")


def _ended(common: dict[str, Any], volume_id: str, slot: schedule.Slot, now: datetime,
           status: JobStatus, code: str, message: str) -> dict[str, Any]:
    return job_values(**common, volume_id=volume_id, slot_at=slot.at, backup_kind=slot.kind,
                      status=status, error_code=code, error_message=message, queued_at=now,
                      created_at=now, finished_at=now)


def request_prunes(db: Database, settings: Settings, now: datetime) -> int:
    """A prune job for every enabled plan not pruned for `prune_interval_seconds`."""
    cutoff = now - timedelta(seconds=settings.prune_interval_seconds)
    with db.session() as session:
        plans = list(session.execute(
            select(Plan.id, Plan.project_id).where(
                Plan.status == PlanStatus.ENABLED,
                (Plan.last_pruned_at.is_(None)) | (Plan.last_pruned_at < cutoff))
        ).tuples())
        for plan_id, project_id in plans:
            request_prune(session, plan_id, project_id, now)
    return len(plans)
