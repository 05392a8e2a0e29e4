"""Rows for tests that drive the scheduler directly: plans over volume rows (the volumes
need not exist in Ceph when no worker runs their jobs)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from services.db import Database
from services.plans import timing
from services.records.jobs import Job
from services.records.plans import Plan
from services.records.volumes import Volume
from services.status import Consistency, JobKind, JobStatus, PlanStatus


def make_plan(db: Database, *, project: str, volumes: int | list[str],
              rules: list[dict[str, Any]], now: datetime, timezone: str = "UTC",
              window: tuple[str, str] | None = None, target: str = "local",
              retention: dict[str, int] | None = None,
              consistency: Consistency = Consistency.VOLUME) -> str:
    """A plan over new volume rows (`volumes` simulated ones, or these images of
    ceph-a/volumes), its cursor at its first slot after `now`."""
    images = (volumes if isinstance(volumes, list)
              else [f"sim-{uuid.uuid4().hex[:10]}" for _ in range(volumes)])
    with db.session() as session:
        vols = [Volume(project_id=project, cluster="ceph-a", pool="volumes", image=image)
                for image in images]
        session.add_all(vols)
        plan = Plan(project_id=project, name=f"plan-{uuid.uuid4().hex[:8]}", target=target,
                    timezone=timezone, rules=rules, retention=retention or {},
                    window_start=window[0] if window else None,
                    window_end=window[1] if window else None, status=PlanStatus.ENABLED,
                    consistency=consistency, created_at=now, updated_at=now)
        plan.volumes = vols
        plan.next_slot_at = timing.next_slot_after(plan, now)
        session.add(plan)
        session.flush()
        return plan.id


def jobs_of(db: Database, plan_id: str, kind: JobKind = JobKind.BACKUP) -> list[Job]:
    with db.session() as session:
        rows = list(session.scalars(select(Job).where(Job.plan_id == plan_id, Job.kind == kind)
                                    .order_by(Job.slot_at, Job.volume_id)))
        session.expunge_all()
        return rows


def count_by_status(db: Database, plan_ids: list[str],
                    kind: JobKind = JobKind.BACKUP) -> dict[str, int]:
    with db.session() as session:
        return {str(status): int(n) for status, n in session.execute(
            select(Job.status, func.count()).where(Job.plan_id.in_(plan_ids), Job.kind == kind)
            .group_by(Job.status))}


def duplicate_slots(db: Database) -> int:
    """(plan, volume, slot) with more than one job: must always be 0."""
    with db.session() as session:
        dup = (select(Job.plan_id, Job.volume_id, Job.slot_at).where(Job.slot_at.is_not(None))
               .group_by(Job.plan_id, Job.volume_id, Job.slot_at)
               .having(func.count() > 1).subquery())
        return int(session.scalar(select(func.count()).select_from(dup)) or 0)


__all__ = ["JobStatus", "count_by_status", "duplicate_slots", "jobs_of", "make_plan"]
