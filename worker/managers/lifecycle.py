"""A job's life inside a worker: claim it (`claim.py`), run its body with its reporter
going (`reporter.py`; the body drives its steps with `drive.py`), then free its slots and
hand them on to the next queued jobs. A job that cannot even start says why."""

from __future__ import annotations

import logging
from collections.abc import Callable

from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from services.base import utcnow
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.status import (
    JOB_TRANSITIONS,
    RESTORE_POINT_TRANSITIONS,
    JobStatus,
    RestorePointStatus,
    guarded_update,
    guarded_update_where,
)
from services.webhooks import openstack
from worker.managers.claim import ClaimedJob, claim
from worker.managers.drive import failure_reason
from worker.managers.reporter import JobReporter
from worker.managers.signals import JobLost
from worker.runtime import Runtime

log = logging.getLogger(__name__)


JobBody = Callable[[ClaimedJob, JobReporter], None]


def run_job(rt: Runtime, job_id: str, kind: str, body: JobBody) -> None:
    """Claim the job and run `body` with its heartbeat going; a job that is not queued (a
    duplicate delivery) or that another worker took over is left alone. Its concurrency
    slots are freed when it ends, however it ends."""
    try:
        job = claim(rt, job_id)
    except (DBAPIError, RedisError):
        # The database or Redis is briefly away: the job stays queued and the scheduler
        # sends it again (it was marked sent, so after job_redispatch_after_seconds).
        log.warning("%s job %s could not be picked up now; it will be sent again", kind,
                    job_id, exc_info=True)
        return
    except Exception as exc:
        # Nothing fails silently: a job that cannot even start says why.
        log.exception("%s job %s could not start", kind, job_id)
        _fail_unstarted(rt, job_id, exc)
        return
    if job is None:
        log.info("%s job %s is not startable now; nothing to do", kind, job_id)
        return
    try:
        with JobReporter(rt.db, job, rt.settings.progress_interval_seconds,
                         rt.leases, rt.limits,
                         notify_openstack=openstack.enabled(rt.settings)) as reporter:
            try:
                body(job, reporter)
            except JobLost:
                log.warning("%s job %s was taken over by another worker", kind, job_id)
    finally:
        try:
            rt.leases.release(job.id, list(job.scopes))
        except Exception:
            log.warning("could not free the slots of job %s; they expire by themselves",
                        job_id, exc_info=True)
        else:
            _hand_on(rt)


def _hand_on(rt: Runtime) -> None:
    """Start the next queued jobs in the slots this one freed, rather than leave them
    empty until the scheduler's next round (up to a tick per wave of a plan's jobs)."""
    if rt.admission is None:
        return
    try:
        rt.admission.hand_on(rt.clock())
    except Exception:
        # The scheduler's round admits them instead.
        log.warning("could not start the next queued jobs; the scheduler will",
                    exc_info=True)


def _fail_unstarted(rt: Runtime, job_id: str, exc: Exception) -> None:
    code, message = failure_reason(exc)
    text = f"the job could not start: {message}"
    try:
        with rt.db.session() as session:
            if guarded_update(session, Job, job_id, JOB_TRANSITIONS, JobStatus.FAILED,
                              expect=JobStatus.QUEUED,
                              extra={"finished_at": utcnow(), "error_code": code,
                                     "error_message": text}):
                # Its restore point (made when it was queued) holds nothing yet: it
                # must not stay `creating`, counted against the quota for ever.
                made = select(Job.restore_point_id).where(Job.id == job_id,
                                                          Job.attempt == 0)
                guarded_update_where(
                    session, RestorePoint, RESTORE_POINT_TRANSITIONS,
                    RestorePointStatus.ERROR, expect=RestorePointStatus.CREATING,
                    where=(RestorePoint.id.in_(made),),
                    extra={"status_reason": text, "quota_bytes": 0})
    except Exception:
        # The database itself is away: the job stays queued and is retried.
        log.warning("could not record why job %s did not start", job_id, exc_info=True)
