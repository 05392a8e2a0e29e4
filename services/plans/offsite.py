"""A plan's off-site copies (its `copy` policy): after each of its backups, the new restore
point is copied from the backup pool to the policy's object target, unless the volume has a
copy there from the same period already."""

from __future__ import annotations

import logging
from datetime import datetime
from zoneinfo import ZoneInfo

from sqlalchemy import select
from sqlalchemy.orm import Session

from services import targets
from services.jobs import factory
from services.plans import schedule
from services.records.jobs import Job
from services.records.plans import Plan
from services.records.restore_points import RestorePoint
from services.restore_points import copies
from services.settings import Settings
from services.status import RestorePointStatus

log = logging.getLogger(__name__)


def period(at: datetime, tz: ZoneInfo, every: str) -> tuple[int, ...]:
    """The calendar period `at` falls in, on the plan's wall clock."""
    local = at.astimezone(tz)
    if every == "day":
        return (local.year, local.month, local.day)
    if every == "week":
        year, week, _ = local.isocalendar()
        return (year, week)
    return (local.year, local.month)


def copy_after_backup(session: Session, settings: Settings, plan_id: str,
                      rp_id: str) -> Job | None:
    """Queue the copy of a plan's new restore point when its policy asks for one."""
    plan = session.get(Plan, plan_id)
    if plan is None or plan.copy_policy is None:
        return None
    policy = plan.copy_policy
    rp = session.get(RestorePoint, rp_id)
    if rp is None or rp.status != RestorePointStatus.AVAILABLE or rp.target != plan.target:
        return None
    to, source = targets.find(settings, policy.target), targets.find(settings, rp.target)
    if to is None or not to.receives_copies or (source is not None and not source.sends_copies):
        log.warning("plan %s: copy target %r is not an object target of this service (or "
                    "the plan backs up to one); no copy made", plan.id, policy.target)
        return None
    if policy.every != "backup":
        tz = schedule.zone(plan.timezone)
        made = session.scalars(select(RestorePoint.created_at).where(
            RestorePoint.volume_id == rp.volume_id, RestorePoint.target == policy.target,
            RestorePoint.plan_id == plan.id,
            RestorePoint.status.in_([RestorePointStatus.CREATING,
                                     RestorePointStatus.AVAILABLE])))
        this = period(rp.created_at, tz, policy.every)
        if any(period(at, tz, policy.every) == this for at in made):
            return None
    if copies.copy_of(session, rp.id, policy.target) is not None:
        return None
    return copies.queue_copy(session, settings, rp, policy.target,
                             factory.Qos(plan.qos_bytes_per_second, plan.qos_ops_per_second),
                             plan_id=plan.id)
