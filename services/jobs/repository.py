from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.context import RequestContext
from services.errors import JobNotFound
from services.jobs.models import Job
from services.status import ACTIVE_JOB_STATUSES, JobKind


def get(session: Session, ctx: RequestContext, job_id: str) -> Job:
    job = session.get(Job, job_id)
    # Another project's job is reported exactly like a missing one.
    if job is None or job.project_id != ctx.project_id:
        raise JobNotFound(f"job {job_id!r} not found", job_id=job_id)
    return job


def active_for_restore_point(session: Session, restore_point_id: str,
                             kind: JobKind) -> Job | None:
    return session.scalars(
        select(Job).where(Job.restore_point_id == restore_point_id, Job.kind == kind,
                          Job.status.in_(ACTIVE_JOB_STATUSES)).limit(1)
    ).first()


def active_backup_for_volume(session: Session, volume_id: str) -> Job | None:
    return session.scalars(
        select(Job).where(Job.volume_id == volume_id, Job.kind == JobKind.BACKUP,
                          Job.status.in_(ACTIVE_JOB_STATUSES)).limit(1)
    ).first()
