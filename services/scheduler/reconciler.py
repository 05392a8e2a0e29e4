"""Finds jobs the system lost and puts them back on track. Safe to run in several
scheduler replicas at once: every change is a guarded UPDATE that only one can win.

- running, heartbeat older than the timeout: the worker died. The job goes back to
  `queued` and is sent again; the next attempt cleans up what the dead one left (or fails
  with a reason once the attempts are used up).
- queued, sent longer ago than `redispatch_after`: the broker may have lost the message
  (Redis restarted). It is handed back to admission, which sends it again; a duplicate
  delivery finds the job no longer queued and does nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from services.db import Database
from services.records.jobs import Job
from services.status import JOB_TRANSITIONS, JobStatus, guarded_update

log = logging.getLogger(__name__)


@dataclass
class ReconcileResult:
    requeued: list[str]
    redispatched: list[str]


def reconcile(db: Database, *, now: datetime, heartbeat_timeout: timedelta,
              redispatch_after: timedelta) -> ReconcileResult:
    with db.session() as session:
        requeued = _requeue_dead(session, now, now - heartbeat_timeout)
    with db.session() as session:
        resend = list(session.scalars(
            update(Job).where(Job.status == JobStatus.QUEUED,
                              Job.sent_at < now - redispatch_after)
            .values(sent_at=None).returning(Job.id)
        ))
    return ReconcileResult(requeued, resend)


def _requeue_dead(session: Session, now: datetime, cutoff: datetime) -> list[str]:
    dead = list(session.execute(
        select(Job.id, Job.attempt, Job.worker).where(
            Job.status == JobStatus.RUNNING, Job.heartbeat_at < cutoff)
    ).all())
    out = []
    for job_id, attempt, worker in dead:
        if guarded_update(
                session, Job, job_id, JOB_TRANSITIONS, JobStatus.QUEUED,
                expect=JobStatus.RUNNING, where=(Job.attempt == attempt, Job.heartbeat_at < cutoff),
                extra={"sent_at": None, "error_code": "worker_lost",
                       "error_message": f"worker {worker} stopped responding during attempt "
                       f"{attempt}; the job was queued again"}):
            log.warning("job %s lost its worker %s (attempt %s); queued again",
                        job_id, worker, attempt)
            out.append(job_id)
    return out
