"""Finds jobs the system lost and puts them back on track. Safe to run in several
scheduler replicas at once: every change is a guarded UPDATE that only one can win.

- running, heartbeat older than the timeout: the worker died. The job goes back to
  `queued` and is sent again; the next attempt cleans up what the dead one left (or fails
  with a reason once the attempts are used up).
- queued, sent longer ago than `redispatch_after`: the broker may have lost the message
  (Redis restarted, or the API could not reach it). It is sent again; a duplicate delivery
  finds the job no longer queued and does nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from services.db import Database
from services.dispatch import Dispatcher
from services.jobs.models import Job
from services.status import JobKind, JobStatus

log = logging.getLogger(__name__)


@dataclass
class ReconcileResult:
    requeued: list[str]
    redispatched: list[str]


def reconcile(db: Database, dispatcher: Dispatcher, *, now: datetime,
              heartbeat_timeout: timedelta, redispatch_after: timedelta) -> ReconcileResult:
    with db.session() as session:
        requeued = _requeue_dead(session, now, now - heartbeat_timeout)
    with db.session() as session:
        stale = list(session.execute(
            select(Job.id, Job.kind).where(Job.status == JobStatus.QUEUED,
                                           Job.queued_at < now - redispatch_after)
        ).tuples())
        # Claim the re-send by moving queued_at, so two replicas do not both send.
        resend: list[tuple[str, JobKind]] = []
        for job_id, kind in stale:
            result = session.execute(
                update(Job).where(Job.id == job_id, Job.status == JobStatus.QUEUED,
                                  Job.queued_at < now - redispatch_after)
                .values(queued_at=now)
            )
            if getattr(result, "rowcount", 0) == 1:
                resend.append((job_id, JobKind(kind)))
    for job_id, kind in [*requeued, *resend]:
        try:
            dispatcher.send(job_id, kind)
        except Exception:
            log.warning("could not send job %s; will retry", job_id, exc_info=True)
    return ReconcileResult([j for j, _ in requeued], [j for j, _ in resend])


def _requeue_dead(session: Session, now: datetime,
                  cutoff: datetime) -> list[tuple[str, JobKind]]:
    dead = list(session.execute(
        select(Job.id, Job.kind, Job.attempt, Job.worker).where(
            Job.status == JobStatus.RUNNING, Job.heartbeat_at < cutoff)
    ).tuples())
    out = []
    for job_id, kind, attempt, worker in dead:
        result = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == JobStatus.RUNNING, Job.attempt == attempt,
                   Job.heartbeat_at < cutoff)
            .values(status=JobStatus.QUEUED, queued_at=now, error_code="worker_lost",
                    error_message=f"worker {worker} stopped responding during attempt "
                    f"{attempt}; the job was queued again")
        )
        if getattr(result, "rowcount", 0) == 1:
            log.warning("job %s lost its worker %s (attempt %s); queued again",
                        job_id, worker, attempt)
            out.append((job_id, JobKind(kind)))
    return out
