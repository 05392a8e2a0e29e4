"""Asking for a plan's retention to be applied."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from services.jobs.inserts import insert_ignoring_conflicts, job_values
from services.records.plans import Plan
from services.status import JobKind, JobStatus


def request_prune(session: Session, plan_id: str, project_id: str, now: datetime) -> None:
    """Queue a prune of the plan unless one is already waiting to start."""
    insert_ignoring_conflicts(session, [job_values(
        project_id=project_id, kind=JobKind.PRUNE, plan_id=plan_id, status=JobStatus.QUEUED,
        queued_at=now, created_at=now)])
    session.execute(update(Plan).where(Plan.id == plan_id).values(last_pruned_at=now))
