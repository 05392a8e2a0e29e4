"""Asking for a plan's retention to be applied."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from services.jobs import factory
from services.jobs.inserts import insert_ignoring_conflicts
from services.records.plans import Plan


def request_prune(session: Session, plan_id: str, project_id: str, now: datetime, *,
                  max_attempts: int) -> None:
    """Queue a prune of the plan unless one is already waiting to start."""
    insert_ignoring_conflicts(session, [factory.prune(
        project_id=project_id, plan_id=plan_id, max_attempts=max_attempts, now=now)])
    session.execute(update(Plan).where(Plan.id == plan_id).values(last_pruned_at=now))
