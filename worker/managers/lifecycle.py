"""A job's life inside a worker: claim it (queued -> running, one winner), report progress
and heartbeat while it runs, follow QoS changes and cancel requests, and record how it
ended. Every write after the claim is fenced by the attempt number, so a worker that lost
its job (re-queued after a missed heartbeat) can no longer change it."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy import select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from services.base import utcnow
from services.db import Database
from services.errors import CairnError, QuotaExceeded
from services.limits.leases import Leases, Scope, scopes_for
from services.metrics import events
from services.plans import timing
from services.quotas import service as quotas
from services.records.jobs import Job
from services.records.plans import Plan
from services.records.restore_points import RestorePoint
from services.status import (
    JOB_TRANSITIONS,
    RESTORE_POINT_TRANSITIONS,
    JobKind,
    JobStatus,
    RestoreMethod,
    RestoreMode,
    RestorePointKind,
    RestorePointStatus,
    guarded_update,
    guarded_update_where,
)
from services.webhooks import openstack
from worker.engine.copy import CopyStats
from worker.engine.qos import Pacer
from worker.managers import notices
from worker.managers.limits_watch import LimitsWatch
from worker.managers.phases import Phases
from worker.managers.signals import JobCancelled, JobLost, JobSignal
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
    duplicate delivery, or already done), not due yet, outside its plan's backup window, or
    without a free concurrency slot: it then goes back to admission. A backup whose
    project's quotas have no room for it any more ends `failed` here, before it starts."""
    now = rt.clock()
    began = time.monotonic()
    with rt.db.session() as session:
        job = session.get(Job, job_id)
        if job is None or job.status != JobStatus.QUEUED:
            return None
        wait_until = _start_time(session, job, now)
        if wait_until is not None:
            log.info("job %s waits until %s (not due, or outside its backup window)",
                     job_id, wait_until.isoformat())
            _back_to_admission(session, job_id, not_before=wait_until)
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
            blocked = rt.leases.acquire(job_id, scopes)
            if blocked is not None:
                log.info("job %s waits for a slot on %s", job_id, blocked.label)
                _back_to_admission(session, job_id, not_before=job.not_before)
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


def _start_time(session: Session, job: Job, now: datetime) -> datetime | None:
    """When a job that may not start now may start; None when it may start now."""
    if job.not_before is not None and job.not_before > now:
        return job.not_before
    if job.plan_id is None or job.slot_at is None:
        return None  # on-demand and run-now jobs are not bound to a window
    if job.attempt > 0:
        return None  # a job that started runs to its end, even its retry after a crash
    plan = session.get(Plan, job.plan_id)
    window = timing.window_of(plan) if plan is not None else None
    if window is None or window.contains(now):
        return None
    return window.next_open(now)


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
    rp = RestorePoint(project_id=job.project_id, volume_id=job.volume_id, target=job.target,
                      kind=job.backup_kind or RestorePointKind.INCREMENTAL,
                      plan_id=job.plan_id, group_id=job.group_id, quota_bytes=room)
    session.add(rp)
    session.flush()
    job.restore_point_id = rp.id
    session.flush()


class JobReporter:
    """Keeps a running job's heartbeat fresh from a thread of its own (liveness must not
    depend on progress: a copy may wait on a lock or a slow cluster), follows the job's QoS
    limits and cancel request, and persists progress at most every `interval` seconds.
    When the job is no longer ours or was cancelled, the next progress call raises
    JobLost / JobCancelled so the copy stops."""

    def __init__(self, db: Database, job: ClaimedJob, interval: float,
                 leases: Leases | None, limits: LimitsWatch, *,
                 notify_openstack: bool = False) -> None:
        self.db = db
        self._limits = limits
        self.notify_openstack = notify_openstack
        self.job = job
        self.leases = leases
        self.interval = interval
        self.on_persist: Callable[[CopyStats], None] | None = None
        """Called before each progress write (a backup saves its checkpoint there)."""
        self.quota: Callable[[CopyStats], None] | None = None
        """Called before each progress write by a job that writes a restore point: it
        raises once the project is over its storage quota (`quota_guard.py`)."""
        self._last = 0.0
        self._last_bytes = 0
        self._began = time.monotonic()
        self._lost = threading.Event()
        self._cancel = threading.Event()
        if job.cancel_requested:
            self._cancel.set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"heartbeat-{job.id}",
                                        daemon=True)
        self.pacer = Pacer(job.qos_bytes_per_second, job.qos_ops_per_second,
                           interrupt=self.check)
        self.phases = Phases(queue_wait=job.queue_wait_seconds, claim=job.claim_seconds)
        """Managers lap their steps on it; published on the job when it ends."""

    def __enter__(self) -> JobReporter:
        self._limits.add(self)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._limits.remove(self)
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._write({})
                self._renew_slots()
            except JobLost:
                return
            except Exception:
                # The database may be briefly away; a heartbeat missed for long enough
                # hands the job to another worker, which is the safe outcome.
                log.warning("heartbeat of job %s failed", self.job.id, exc_info=True)

    def _renew_slots(self) -> None:
        if self.leases is None or not self.job.scopes:
            return
        try:
            full = self.leases.acquire(self.job.id, list(self.job.scopes))
        except Exception:
            # Redis away: nothing new is admitted meanwhile, and the job keeps running.
            log.warning("could not renew the slots of job %s", self.job.id, exc_info=True)
            return
        if full is not None:
            log.warning("job %s lost its slot on %s (lease expired and taken); it finishes "
                        "anyway", self.job.id, full.label)

    @property
    def job_id(self) -> str:
        return self.job.id

    def follow_limits(self, bps: int | None, iops: int | None,
                      cancel_at: datetime | None) -> None:
        """The job's row as the limits watch read it: new QoS limits apply at once, a cancel
        request stops the copy at its next progress call."""
        if (bps, iops) != self.pacer.limits():
            log.info("job %s QoS now %s B/s, %s op/s", self.job.id, bps, iops)
            self.pacer.set_limits(bps, iops)
        if isinstance(cancel_at, datetime):
            self._cancel.set()

    def _write(self, values: dict[str, Any]) -> None:
        with self.db.session() as session:
            result: Any = session.execute(
                update(Job)
                .where(Job.id == self.job.id, Job.status == JobStatus.RUNNING,
                       Job.attempt == self.job.attempt)
                .values(heartbeat_at=utcnow(), **values)
            )
            if result.rowcount != 1:
                self._lost.set()
                raise JobLost(f"job {self.job.id} attempt {self.job.attempt} is no longer ours")

    def record(self, **values: Any) -> None:
        """Write these columns of the job while this attempt still owns it (else JobLost)."""
        self._write(values)

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def check(self) -> None:
        if self._lost.is_set():
            raise JobLost(f"job {self.job.id} attempt {self.job.attempt} is no longer ours")
        if self._cancel.is_set():
            raise JobCancelled("cancelled at the user's request")

    def progress(self, stats: CopyStats) -> None:
        self.check()
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        rate = None
        if self._last:
            rate = (stats.bytes_done - self._last_bytes) / (now - self._last)
        self._last, self._last_bytes = now, stats.bytes_done
        if self.quota is not None:
            self.quota(stats)
        if self.on_persist is not None:
            self.on_persist(stats)
        self._write({**stats_values(stats), "rate_bytes_per_second": rate})

    def start_copy(self, bytes_total: int, bytes_resumed: int, window: int) -> None:
        self._last, self._last_bytes = time.monotonic(), bytes_resumed
        self._write({"bytes_total": bytes_total, "bytes_done": bytes_resumed,
                     "bytes_resumed": bytes_resumed, "bytes_read": 0, "bytes_written": 0,
                     "copy_window": window, "rate_bytes_per_second": None})

    def finish(self, status: JobStatus, *, stats: CopyStats | None = None,
               error_code: str | None = None, error_message: str | None = None,
               summary: str | None = None, warnings: list[str] | None = None) -> bool:
        self._stop.set()
        values: dict[str, Any] = {"finished_at": utcnow(), "heartbeat_at": utcnow(),
                                  "error_code": error_code, "error_message": error_message,
                                  "summary": summary,
                                  "warnings": json.dumps(warnings) if warnings else None,
                                  "phase_seconds": self.phases.to_json()}
        if stats is not None:
            values.update(stats_values(stats))
            copied = stats.bytes_done - stats.bytes_resumed
            values["rate_bytes_per_second"] = (copied / stats.elapsed
                                                     if stats.elapsed > 0 else None)
        seconds = time.monotonic() - self._began
        job = self.job
        with self.db.session() as session:
            ended = guarded_update(session, Job, job.id, JOB_TRANSITIONS, status,
                                   expect=JobStatus.RUNNING, extra=values,
                                   where=(Job.attempt == job.attempt,))
            if ended:  # told once, by the attempt that recorded the end, in its transaction
                notices.record_job_end(session, notices.JobFacts.of(
                    job, status, error_code=error_code, error_message=error_message,
                    stats=stats, seconds=seconds), values["finished_at"],
                    notify_openstack=self.notify_openstack)
        if ended:  # counted once, after the commit
            events.job_finished(
                kind=(job.kind or ""), project=job.project_id, plan=job.plan_id,
                target=job.target, outcome=status.value, reason=error_code, seconds=seconds,
                bytes_read=stats.bytes_read if stats else 0,
                bytes_written=stats.bytes_written if stats else 0)
        return ended


def stats_values(stats: CopyStats) -> dict[str, Any]:
    return {"bytes_done": stats.bytes_done, "bytes_total": stats.bytes_total,
            "bytes_read": stats.bytes_read, "bytes_written": stats.bytes_written,
            "bytes_resumed": stats.bytes_resumed,
            "read_seconds": stats.read_seconds, "write_seconds": stats.write_seconds,
            "qos_wait_seconds": stats.qos_wait_seconds,
            "engine_seconds": stats.engine_seconds, "copy_seconds": stats.elapsed,
            "copy_window": stats.window}


@dataclass
class Outcome:
    """How a job's work ended when it raised nothing: succeeded, or (a verify that found
    corruption) failed with a reason, with the copy's figures when it copied."""

    stats: CopyStats | None = None
    summary: str | None = None
    error_code: str | None = None
    error_message: str | None = None


Aftercare = list[tuple[str, Callable[[], None]]]
"""Steps after the commit point, each named for the warning its failure leaves."""


class JobSteps:
    """What one kind of job does, in the order the lifecycle drives it (`drive`):

    1. `committed()`: whether an earlier attempt already passed the commit point (a
       backup's restore point is `available`): the work is then not done again and nothing
       is ever undone; `after_commit()` and the aftercare run.
    2. `work()`: everything up to and including the commit point (and, for a job whose
       work goes on after it, such as an instant restore's flatten, `after_commit()`).
    3. On a failure before the commit point: `undo()` removes what the job made, and
       `record_failure()` records the reason on the job's own rows. Never after it.
    4. `aftercare(outcome)`: best-effort steps after the commit point; a failing one is a
       warning on the job, never a reason to undo.

    This is the one place that rule lives, so no manager can get it wrong on its own."""

    noun = "job"

    def committed(self) -> bool:
        return False

    def after_commit(self) -> Outcome:
        """What is left to do once an earlier attempt passed the commit point; its failure
        is recorded, never undone."""
        return Outcome(summary="finished after the worker of an earlier attempt stopped")

    def work(self) -> Outcome:
        raise NotImplementedError

    def undo(self) -> str:
        """Remove what the job made; returns what was done, for the job's reason ("" when
        there was nothing to say)."""
        return ""

    def record_failure(self, status: JobStatus, code: str, message: str) -> None:
        """Record the failure on the job's other rows (the job itself is recorded after)."""

    def aftercare(self, outcome: Outcome) -> Aftercare:
        return []

    def message(self, exc: BaseException) -> str:
        """The reason recorded for a failure (a cancel says so in its own words)."""
        _code, message = failure_reason(exc)
        return message if isinstance(exc, JobCancelled) else f"{self.noun} failed: {message}"


def drive(job: ClaimedJob, reporter: JobReporter, steps: JobSteps) -> None:
    """Run a claimed job's steps with the failure policy of `JobSteps`."""
    # Raises when the database cannot tell: the job then stays running, its heartbeat
    # stops, and the reconciler hands it to a later attempt.
    committed = steps.committed()
    if committed:
        log.info("%s job %s passed its commit point in an earlier attempt; finishing it",
                 steps.noun, job.id)
    elif job.out_of_attempts:
        undone = _undo(steps)
        message = (f"the worker running this {steps.noun} stopped {job.max_attempts} times; "
                   f"gave up{'; ' + undone if undone else ''}. Check the workers' health and "
                   f"start the {steps.noun} again.")
        steps.record_failure(JobStatus.FAILED, "worker_lost", message)
        reporter.finish(JobStatus.FAILED, error_code="worker_lost", error_message=message)
        return
    try:
        reporter.check()
        outcome = steps.after_commit() if committed else steps.work()
    except JobLost:
        raise  # not ours any more: nothing to clean up or record
    except BaseException as exc:
        # Undo only what did not reach its commit point; a failure after it (the work
        # raised once the restore point was available) is recorded and left.
        undone = "" if _committed_or_unknown(steps) else _undo(steps)
        code, _message = failure_reason(exc)
        # The tenant reads `message`; the raw error, which may name hosts and other
        # projects' objects, is for the operator's log, under the job's id.
        log.error("%s job %s failed (%s): %s: %s", steps.noun, job.id, code,
                  type(exc).__name__, exc, exc_info=not isinstance(exc, CairnError | JobSignal))
        message = steps.message(exc)
        if undone:
            message = f"{message}; {undone}"
        status = end_status(exc)
        steps.record_failure(status, code, message)
        reporter.finish(status, error_code=code, error_message=message)
        if not isinstance(exc, CairnError | JobSignal):
            raise
        return
    _finish(reporter, steps, outcome)


def _committed_or_unknown(steps: JobSteps) -> bool:
    try:
        return steps.committed()
    except Exception:
        # Cannot tell (the database is away): undo nothing; the orphan reconciler removes
        # what no row owns once the failure is recorded.
        log.warning("could not tell whether %s passed its commit point", steps.noun,
                    exc_info=True)
        return True


def _undo(steps: JobSteps) -> str:
    try:
        return steps.undo()
    except Exception as exc:
        log.exception("cleaning up after a failed %s", steps.noun)
        _code, reason = failure_reason(exc)
        return f"could not remove what it made ({reason}); the orphan reconciler removes it"


def _finish(reporter: JobReporter, steps: JobSteps, outcome: Outcome) -> None:
    warnings = []
    for what, step in steps.aftercare(outcome):
        try:
            step()
        except Exception as exc:
            _code, message = failure_reason(exc)
            log.warning("%s: %s", what, message, exc_info=not isinstance(exc, CairnError))
            warnings.append(f"{what}: {message}")
    reporter.phases.lap("aftercare")
    status = JobStatus.FAILED if outcome.error_code else JobStatus.SUCCEEDED
    reporter.finish(status, stats=outcome.stats, summary=outcome.summary,
                    error_code=outcome.error_code, error_message=outcome.error_message,
                    warnings=warnings)


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


def failure_reason(exc: BaseException) -> tuple[str, str]:
    """(code, message) to record for a failure, in words a tenant can read and act on.
    Cairn's own errors say what happened (Ceph's become them where they leave
    `CephClusters.ioctx`); the raw text of others (the database's, Python's) names hosts,
    statements and other projects' ids, so it goes to the worker's log with the job id
    (`drive`), never to the job."""
    if isinstance(exc, CairnError | JobSignal):
        return exc.code, exc.message
    if isinstance(exc, DBAPIError):
        return "database_unavailable", ("the service's database failed during the job; run "
                                        "it again")
    return "internal_error", ("an unexpected error stopped the job; the operator's logs have "
                              "the details")


def end_status(exc: BaseException) -> JobStatus:
    return JobStatus.CANCELLED if isinstance(exc, JobCancelled) else JobStatus.FAILED
