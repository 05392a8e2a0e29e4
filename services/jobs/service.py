"""Operator actions on a job: cancel it, change its QoS while it runs."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from services.base import utcnow
from services.context import RequestContext
from services.errors import JobNotCancellable, JobNotChangeable
from services.jobs import repository
from services.jobs.schemas import JobUpdate
from services.openstack.cinder_gateway import CinderGateway
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.status import (
    ACTIVE_JOB_STATUSES,
    COPY_JOB_KINDS,
    JOB_TRANSITIONS,
    RESTORE_POINT_TRANSITIONS,
    JobStatus,
    RestoreMethod,
    RestoreMode,
    RestorePointStatus,
    guarded_update,
    guarded_update_where,
)

log = logging.getLogger(__name__)


def cancel(session: Session, ctx: RequestContext, job_id: str,
           cinder: CinderGateway | None = None) -> Job:
    """A job that never started is cancelled at once (a restore's new Cinder volume, made
    when it was asked for, is deleted). A running one (or one queued again after a crash,
    which may have left a partial copy) is asked to stop: its worker removes what it made
    and then marks it cancelled."""
    job = repository.get(session, ctx, job_id)
    _require_changeable(job, "cancelled")
    if job.ready_at is not None and job.restore_method == RestoreMethod.INSTANT:
        target = job.restore_cinder_volume_id or job.restore_target
        raise JobNotCancellable(
            f"job {job.id} already handed over {target}, which may be in use; its flatten "
            "must finish so that the volume stops depending on restore point "
            f"{job.restore_point_id}. Lower its QoS instead (PATCH the job), or delete the "
            "volume if you do not need it", job_id=job.id)
    now = utcnow()
    never_started = guarded_update(
        session, Job, job.id, JOB_TRANSITIONS, JobStatus.CANCELLED, expect=JobStatus.QUEUED,
        extra={"cancel_requested_at": now, "finished_at": now, "error_code": "cancelled",
               "error_message": "cancelled at the user's request before it started"},
        where=(Job.attempt == 0,),
    )
    if never_started:
        drop_unstarted_restore_points(session, [job.id], now,
                                      f"{job.kind} cancelled before it started")
        if job.restore_mode == RestoreMode.NEW_VOLUME and job.restore_cinder_volume_id:
            warning = (_discard_volume(ctx, cinder, job.restore_cinder_volume_id)
                       if cinder is not None else "Cinder is not configured")
            if warning is not None:
                session.execute(update(Job).where(Job.id == job.id)
                                .values(warnings=json.dumps([warning])))
    else:
        session.execute(update(Job).where(Job.id == job.id, Job.cancel_requested_at.is_(None))
                        .values(cancel_requested_at=now))
    session.flush()
    session.refresh(job)
    return job


def drop_unstarted_restore_points(session: Session, job_ids: Sequence[str], now: datetime,
                                  reason: str) -> int:
    """The `creating` restore points of jobs that ended before they started (cancelled by a
    user, or with their plan) are gone: nothing was written for them, and left `creating`
    they would count against the project's quotas for ever and refuse every later copy of
    the same restore point to the same target. Backups and off-site copies alike: whatever
    job kind makes a restore point. Returns how many went."""
    if not job_ids:
        return 0
    made = select(Job.restore_point_id).where(
        Job.id.in_(job_ids), Job.status == JobStatus.CANCELLED, Job.attempt == 0,
        Job.restore_point_id.is_not(None))
    return guarded_update_where(
        session, RestorePoint, RESTORE_POINT_TRANSITIONS, RestorePointStatus.DELETED,
        expect=RestorePointStatus.CREATING, where=(RestorePoint.id.in_(made),),
        extra={"deleted_at": now, "status_reason": reason, "quota_bytes": 0})


def _discard_volume(ctx: RequestContext, cinder: CinderGateway, volume_id: str) -> str | None:
    """Delete the volume made for a restore that will not run; a warning for the job when
    that fails (the volume is then the user's to delete)."""
    try:
        cinder.for_user(ctx).discard(volume_id)
    except Exception:
        log.warning("could not delete Cinder volume %s of a cancelled restore", volume_id,
                    exc_info=True)
        return (f"the new Cinder volume {volume_id} made for this restore could not be deleted; "
                "delete it (openstack volume delete)")
    return None


def update_job(session: Session, ctx: RequestContext, job_id: str, change: JobUpdate) -> Job:
    job = repository.get(session, ctx, job_id)
    _require_changeable(job, "changed")
    values = {field: getattr(change, field) for field in change.model_fields_set}
    if values:
        session.execute(update(Job).where(Job.id == job.id).values(**values))
        session.flush()
        session.refresh(job)
    return job


def _require_changeable(job: Job, what: str) -> None:
    refused = JobNotCancellable if what == "cancelled" else JobNotChangeable
    if job.kind not in COPY_JOB_KINDS:
        raise refused(f"a {job.kind} job cannot be {what}; it is short and "
                      "undoing it half-way would leave more behind", job_id=job.id)
    if job.status not in ACTIVE_JOB_STATUSES:
        raise refused(f"job {job.id} is already {job.status} and cannot be {what}",
                      job_id=job.id, status=job.status)
