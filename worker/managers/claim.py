"""Taking a job: the worker's claim moves it from queued to running (one winner: a guarded
update, so a duplicate delivery finds nothing to do), takes its concurrency slots, makes a
scheduled backup's restore point, and hands back to admission what may not start yet.
What the claim read is the `ClaimedJob` every later step of the job works from."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from services.base import utcnow
from services.errors import QuotaExceeded
from services.jobs import start_rule
from services.limits.leases import Scope, scopes_for
from services.metrics import events
from services.plans import timing
from services.quotas import service as quotas
from services.records.jobs import Job
from services.records.plans import Plan
from services.records.restore_points import RestorePoint
from services.restore_points import factory as rp_factory
from services.status import (
    JOB_TRANSITIONS,
    JobKind,
    JobStatus,
    RestoreMethod,
    RestoreMode,
    RestorePointKind,
    guarded_update,
)
from services.webhooks import openstack
from worker.managers import notices
from worker.runtime import Runtime

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ClaimedJob:
    """What a manager knows of the job it runs, read once when the worker claimed it."""

    id: str
    attempt: int
    max_attempts: int
    restore_point_id: str | None
    volume_id: str | None
    restore_target: str | None
    qos_bytes_per_second: int | None
    qos_ops_per_second: int | None
    cancel_requested: bool
    project_id: str = ""
    plan_id: str | None = None
    scopes: tuple[Scope, ...] = ()
    """The concurrency slots the job holds; renewed with its heartbeat, freed at its end."""
    restore_mode: RestoreMode | None = None
    restore_cinder_volume_id: str | None = None
    verify_fraction: float | None = None
    kind: JobKind | None = None
    target: str | None = None
    restore_method: RestoreMethod = RestoreMethod.COPY
    group_id: str | None = None
    """A backup of a group plan's run: it reads the run's RBD group snapshot."""
    queue_wait_seconds: float = 0.0
    """From when the job was queued (or due, if later) to its claim."""
    claim_seconds: float = 0.0

    @classmethod
    def of(cls, job: Job, scopes: tuple[Scope, ...]) -> ClaimedJob:
        return cls(id=job.id, attempt=job.attempt, max_attempts=job.max_attempts,
                   restore_point_id=job.restore_point_id, volume_id=job.volume_id,
                   restore_target=job.restore_target,
                   qos_bytes_per_second=job.qos_bytes_per_second,
                   qos_ops_per_second=job.qos_ops_per_second,
                   cancel_requested=job.cancel_requested_at is not None,
                   project_id=job.project_id, plan_id=job.plan_id, scopes=scopes,
                   restore_mode=job.restore_mode,
                   restore_cinder_volume_id=job.restore_cinder_volume_id,
                   verify_fraction=job.verify_fraction, kind=JobKind(job.kind),
                   target=job.target, restore_method=RestoreMethod(job.restore_method),
                   group_id=job.group_id)

    @property
    def out_of_attempts(self) -> bool:
        return self.attempt > self.max_attempts


def claim(rt: Runtime, job_id: str) -> ClaimedJob | None:
    """Move the job from queued to running for this worker; None when it is not queued (a
    duplicate delivery, or already done), or when the start rule says it must wait (not
    due, outside its plan's backup window, no free concurrency slot): it then goes back to
    admission. A backup whose project's quotas have no room for it any more ends `failed`
    here, before it starts."""
    now = rt.clock()
    began = time.monotonic()
    with rt.db.session() as session:
        job = session.get(Job, job_id)
        if job is None or job.status != JobStatus.QUEUED:
            return None
        # Admission sent it under the start rule; time passed since (a window may have
        # closed), so the rule is asked again before anything is taken.
        facts = start_rule.StartFacts.of(job)
        window = _window(session, facts)
        wait = start_rule.must_wait(facts, window, now)
        if wait is not None:
            log.info("job %s waits until %s (%s)", job_id,
                     wait.until.isoformat() if wait.until else "-", wait.reason)
            _back_to_admission(session, job_id, not_before=wait.until)
            return None
        scopes = scopes_for(rt.settings, JobKind(job.kind), job.project_id, job.target)
        refused_job: ClaimedJob | None = None
        room, refused = (_quota_room(session, job)
                         if job.kind == JobKind.BACKUP and job.restore_point_id is None
                         else (0, None))
        if refused is not None:
            log.info("job %s refused at its start: %s", job_id, refused)
            refused_job = _refuse(session, job, QuotaExceeded.code, refused,
                                  notify_openstack=openstack.enabled(rt.settings))
        else:
            # Renews the slots admission took for it; takes them again if they lapsed.
            wait = start_rule.must_wait(facts, window, now,
                                        full=rt.leases.acquire(job_id, scopes))
            if wait is not None:
                log.info("job %s waits for a slot on %s", job_id,
                         wait.full.label if wait.full else "-")
                _back_to_admission(session, job_id, not_before=wait.until)
                return None
            due = max(job.queued_at, job.not_before or job.queued_at)
            try:
                claimed = _start(session, job, scopes, rt.name, room=room,
                                 notify_openstack=openstack.enabled(rt.settings))
            except BaseException:
                # Not started after all (the database went away, or another delivery
                # won): the slots are not kept for a job that is not running here.
                rt.leases.release(job_id, scopes)
                raise
    if refused is not None:
        rt.leases.release(job_id, scopes)  # admission's slots for it go to the next job
        if refused_job is not None:  # counted once, after the commit
            events.job_finished(kind=JobKind.BACKUP, project=refused_job.project_id,
                                plan=refused_job.plan_id, target=refused_job.target,
                                outcome=JobStatus.FAILED, reason=QuotaExceeded.code,
                                seconds=0.0, bytes_read=0, bytes_written=0)
        return None
    if claimed is None:
        return None
    return replace(claimed, claim_seconds=time.monotonic() - began,
                   queue_wait_seconds=max(0.0, (utcnow() - due).total_seconds()))


def _start(session: Session, job: Job, scopes: list[Scope], worker: str, *, room: int = 0,
           notify_openstack: bool = False) -> ClaimedJob | None:
    job_id = job.id
    won = guarded_update(
        session, Job, job_id, JOB_TRANSITIONS, JobStatus.RUNNING, expect=JobStatus.QUEUED,
        extra={"attempt": Job.attempt + 1, "started_at": utcnow(), "heartbeat_at": utcnow(),
               "worker": worker, "finished_at": None},
    )
    if not won:
        # Another delivery of the same job won; the leases are shared by job id.
        return None
    session.refresh(job)
    if job.kind == JobKind.BACKUP and job.restore_point_id is None:
        _create_restore_point(session, job, room)
    events.job_started(job.kind, job.project_id, job.plan_id)
    claimed = ClaimedJob.of(job, tuple(scopes))
    # Committed with the move to running (the claim's transaction), as the end is with its.
    notices.record_job_start(session, claimed, utcnow(), notify_openstack=notify_openstack)
    return claimed


def _window(session: Session, facts: start_rule.StartFacts) -> start_rule.Window | None:
    """The backup window the start rule holds the job to, if it keeps to one."""
    if not facts.keeps_to_window:
        return None
    assert facts.plan_id is not None
    plan = session.get(Plan, facts.plan_id)
    return timing.window_of(plan) if plan is not None else None


def _back_to_admission(session: Session, job_id: str, *, not_before: datetime | None) -> None:
    session.execute(update(Job).where(Job.id == job_id, Job.status == JobStatus.QUEUED)
                    .values(sent_at=None, not_before=not_before))


def _quota_room(session: Session, job: Job) -> tuple[int, str | None]:
    """What a scheduled or run-now backup's restore point reserves, and why the project's
    quotas refuse it now (the quota may have filled since the job was queued)."""
    assert job.volume_id is not None
    assert job.target is not None
    room = quotas.estimate(session, job.volume_id, job.target,
                           job.backup_kind or RestorePointKind.INCREMENTAL)
    return room, quotas.shortfall(session, job.project_id, 1, room)


def _refuse(session: Session, job: Job, code: str, message: str, *,
            notify_openstack: bool) -> ClaimedJob | None:
    """A queued job that may not start at all ends `failed` with the reason, told as any
    job's end is (the project's webhooks, OpenStack notifications); returns it when this
    call ended it."""
    now = utcnow()
    text = f"the job could not start: {message}"
    if not guarded_update(session, Job, job.id, JOB_TRANSITIONS, JobStatus.FAILED,
                          expect=JobStatus.QUEUED,
                          extra={"finished_at": now, "error_code": code,
                                 "error_message": text}):
        return None
    ended = ClaimedJob.of(job, ())
    notices.record_job_end(session, notices.JobFacts.of(
        ended, JobStatus.FAILED, error_code=code, error_message=text), now,
        notify_openstack=notify_openstack)
    return ended


def _create_restore_point(session: Session, job: Job, room: int) -> None:
    """A scheduled or run-now backup gets its restore point when it starts, so a job
    waiting for its window or a free slot holds no half-made restore point."""
    assert job.volume_id is not None
    assert job.target is not None
    rp = RestorePoint(**rp_factory.backup(
        project_id=job.project_id, volume_id=job.volume_id, target=job.target,
        kind=job.backup_kind or RestorePointKind.INCREMENTAL, room=room, plan_id=job.plan_id,
        group_id=job.group_id))
    session.add(rp)
    session.flush()
    job.restore_point_id = rp.id
    session.flush()
