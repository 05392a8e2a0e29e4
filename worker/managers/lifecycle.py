"""A job's life inside a worker: claim it (queued -> running, one winner), report progress
and heartbeat while it runs, follow QoS changes and cancel requests, and record how it
ended. Every write after the claim is fenced by the attempt number, so a worker that lost
its job (re-queued after a missed heartbeat) can no longer change it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from services.base import utcnow
from services.db import Database
from services.errors import CairnError, JobCancelled, JobLost
from services.jobs.models import Job
from services.status import JOB_TRANSITIONS, JobStatus, guarded_update
from worker.engine.copy import CopyStats
from worker.engine.qos import Pacer

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25
"""How often a running job looks for QoS changes and cancel requests: an operator's change
takes effect well within a second."""


@dataclass(frozen=True)
class ClaimedJob:
    id: str
    attempt: int
    max_attempts: int
    restore_point_id: str | None
    volume_id: str | None
    restore_target: str | None
    qos_bytes_per_second: int | None
    qos_ops_per_second: int | None
    cancel_requested: bool

    @property
    def out_of_attempts(self) -> bool:
        return self.attempt > self.max_attempts


def claim(db: Database, job_id: str, worker: str) -> ClaimedJob | None:
    """Move the job from queued to running for this worker; None when it is not queued
    (a duplicate delivery, or already done)."""
    now = utcnow()
    with db.session() as session:
        won = guarded_update(
            session, Job, job_id, JOB_TRANSITIONS, JobStatus.RUNNING, expect=JobStatus.QUEUED,
            extra={"attempt": Job.attempt + 1, "started_at": now, "heartbeat_at": now,
                   "worker": worker, "finished_at": None},
        )
        if not won:
            return None
        job = session.get(Job, job_id, populate_existing=True)
        assert job is not None
        return ClaimedJob(job.id, job.attempt, job.max_attempts, job.restore_point_id,
                          job.volume_id, job.restore_target, job.qos_bytes_per_second,
                          job.qos_ops_per_second, job.cancel_requested_at is not None)


class JobReporter:
    """Keeps a running job's heartbeat fresh from a thread of its own (liveness must not
    depend on progress: a copy may wait on a lock or a slow cluster), follows the job's QoS
    limits and cancel request, and persists progress at most every `interval` seconds.
    When the job is no longer ours or was cancelled, the next progress call raises
    JobLost / JobCancelled so the copy stops."""

    def __init__(self, db: Database, job: ClaimedJob, interval: float) -> None:
        self.db = db
        self.job = job
        self.interval = interval
        self.pacer = Pacer(job.qos_bytes_per_second, job.qos_ops_per_second)
        self.on_persist: Callable[[CopyStats], None] | None = None
        """Called before each progress write (a backup saves its checkpoint there)."""
        self._last = 0.0
        self._last_bytes = 0
        self._lost = threading.Event()
        self._cancel = threading.Event()
        if job.cancel_requested:
            self._cancel.set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"heartbeat-{job.id}",
                                        daemon=True)

    def __enter__(self) -> JobReporter:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        last_beat = time.monotonic()
        while not self._stop.wait(min(POLL_SECONDS, self.interval)):
            try:
                self._follow_limits()
                if time.monotonic() - last_beat >= self.interval:
                    self._write({})
                    last_beat = time.monotonic()
            except JobLost:
                return
            except Exception:
                # The database may be briefly away; a heartbeat missed for long enough
                # hands the job to another worker, which is the safe outcome.
                log.warning("heartbeat of job %s failed", self.job.id, exc_info=True)

    def _follow_limits(self) -> None:
        with self.db.session() as session:
            row = session.execute(
                select(Job.qos_bytes_per_second, Job.qos_ops_per_second,
                       Job.cancel_requested_at).where(Job.id == self.job.id)
            ).one()
        bps, iops, cancel_at = row
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
        if self.on_persist is not None:
            self.on_persist(stats)
        self._write({**stats_values(stats), "throughput_bytes_per_second": rate})

    def start_copy(self, bytes_total: int, bytes_resumed: int, window: int) -> None:
        self._last, self._last_bytes = time.monotonic(), bytes_resumed
        self._write({"bytes_total": bytes_total, "bytes_done": bytes_resumed,
                     "bytes_resumed": bytes_resumed, "bytes_read": 0, "bytes_written": 0,
                     "copy_window": window, "throughput_bytes_per_second": None})

    def finish(self, status: JobStatus, *, stats: CopyStats | None = None,
               error_code: str | None = None, error_message: str | None = None) -> bool:
        self._stop.set()
        values: dict[str, Any] = {"finished_at": utcnow(), "heartbeat_at": utcnow(),
                                  "error_code": error_code, "error_message": error_message}
        if stats is not None:
            values.update(stats_values(stats))
            copied = stats.bytes_done - stats.bytes_resumed
            values["throughput_bytes_per_second"] = (copied / stats.elapsed
                                                     if stats.elapsed > 0 else None)
        with self.db.session() as session:
            return guarded_update(session, Job, self.job.id, JOB_TRANSITIONS, status,
                                  expect=JobStatus.RUNNING, extra=values,
                                  where=(Job.attempt == self.job.attempt,))


def stats_values(stats: CopyStats) -> dict[str, Any]:
    return {"bytes_done": stats.bytes_done, "bytes_total": stats.bytes_total,
            "bytes_read": stats.bytes_read, "bytes_written": stats.bytes_written,
            "bytes_resumed": stats.bytes_resumed,
            "read_seconds": stats.read_seconds, "write_seconds": stats.write_seconds,
            "qos_wait_seconds": stats.qos_wait_seconds,
            "engine_seconds": stats.engine_seconds, "copy_seconds": stats.elapsed,
            "copy_window": stats.window}


JobBody = Callable[[ClaimedJob, JobReporter], None]


def run_job(db: Database, worker: str, job_id: str, kind: str, interval: float,
            body: JobBody) -> None:
    """Claim the job and run `body` with its heartbeat going; a job that is not queued (a
    duplicate delivery) or that another worker took over is left alone."""
    job = claim(db, job_id, worker)
    if job is None:
        log.info("%s job %s is not queued; nothing to do", kind, job_id)
        return
    with JobReporter(db, job, interval) as reporter:
        try:
            body(job, reporter)
        except JobLost:
            log.warning("%s job %s was taken over by another worker", kind, job_id)


def failure_reason(exc: BaseException) -> tuple[str, str]:
    """(code, message) to record for a failure a user has to act on."""
    if isinstance(exc, CairnError):
        return exc.code, exc.message
    return "internal_error", f"unexpected error in the worker: {type(exc).__name__}: {exc}"


def end_status(exc: BaseException) -> JobStatus:
    return JobStatus.CANCELLED if isinstance(exc, JobCancelled) else JobStatus.FAILED
