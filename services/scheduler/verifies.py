"""Scheduled verification: each plan's restore points are re-read on its verify policy
(sampled every week and fully every month by default), so damage in the backup pool is found
by Cairn, not by the restore that needed the data. A restore point found corrupt refuses
restores until a full verify finds it intact again."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from services import targets
from services.db import Database
from services.jobs import factory
from services.jobs.inserts import insert_ignoring_conflicts
from services.plans.schemas import verify_policy_of
from services.records.jobs import Job
from services.records.plans import Plan, VerifyPolicy
from services.records.restore_points import RestorePoint
from services.settings import Settings
from services.status import ACTIVE_JOB_STATUSES, JobKind, RestorePointStatus

PER_ROUND = 500
"""Verifies queued in one round: a plan that just got a policy catches up over rounds,
and admission's per-target limits pace what runs."""


def due_fraction(policy: VerifyPolicy, rp: RestorePoint, now: datetime) -> tuple[bool, float
                                                                                 | None]:
    """(due, fraction): whether the restore point is due for a verify now, and whether
    that one reads a sample (the fraction) or everything (None). Full wins when both are
    due: it covers the sample."""
    done = rp.completed_at or rp.created_at
    if policy.full_every_days is not None:
        last_full = rp.verified_full_at or done
        if now - last_full >= timedelta(days=policy.full_every_days):
            return True, None
    if policy.sampled_every_days is not None:
        last = max(rp.verified_at or done, done)
        if now - last >= timedelta(days=policy.sampled_every_days):
            return True, policy.sample_fraction
    return False, None


def request_verifies(db: Database, settings: Settings, now: datetime,
                     plan_ids: Collection[str] | None = None) -> int:
    """Queue the verifies that are due (of these plans only, when given), at most
    PER_ROUND; returns how many."""
    with db.session() as session:
        rows: list[dict[str, Any]] = []
        plans = select(Plan) if plan_ids is None else select(Plan).where(Plan.id.in_(plan_ids))
        for plan in session.scalars(plans):
            policy = verify_policy_of(plan)
            for rp in _candidates(session, plan.id, policy, targets.names(settings), now,
                                  PER_ROUND - len(rows)):
                due, fraction = due_fraction(policy, rp, now)
                if due:
                    rows.append(factory.verify(
                        rp, fraction=fraction, plan_id=plan.id, now=now,
                        max_attempts=settings.job_max_attempts,
                        qos=factory.Qos(plan.qos_bytes_per_second, plan.qos_ops_per_second)))
            if len(rows) >= PER_ROUND:
                break
        insert_ignoring_conflicts(session, rows)
    return len(rows)


def _candidates(session: Session, plan_id: str, policy: VerifyPolicy, targets: list[str],
                now: datetime, limit: int) -> list[RestorePoint]:
    """The plan's available restore points that may be due (the database narrows them by
    date, so a tick does not load every restore point), have no verify queued or running,
    and are on a target this service configures (no worker could read the others);
    `due_fraction` decides."""
    if limit <= 0:
        return []
    done = func.coalesce(RestorePoint.completed_at, RestorePoint.created_at)
    due = []
    if policy.full_every_days is not None:
        due.append(func.coalesce(RestorePoint.verified_full_at, done)
                   <= now - timedelta(days=policy.full_every_days))
    if policy.sampled_every_days is not None:
        due.append(func.coalesce(RestorePoint.verified_at, done)
                   <= now - timedelta(days=policy.sampled_every_days))
    if not due:
        return []
    busy = select(Job.restore_point_id).where(Job.kind == JobKind.VERIFY,
                                              Job.status.in_(ACTIVE_JOB_STATUSES),
                                              Job.restore_point_id.is_not(None))
    return list(session.scalars(select(RestorePoint).where(
        RestorePoint.plan_id == plan_id, RestorePoint.status == RestorePointStatus.AVAILABLE,
        RestorePoint.id.not_in(busy), RestorePoint.target.in_(targets),
        or_(*due)).limit(limit)))
