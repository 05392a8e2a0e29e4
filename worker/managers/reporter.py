"""A running job's voice: its heartbeat (on a thread of its own), its progress, its QoS
limits and cancel request as the limits watch reads them, and how it ended. Every write is
fenced by the attempt number, so a worker that lost its job (re-queued after a missed
heartbeat) can no longer change it."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import update

from services.base import utcnow
from services.db import Database
from services.limits.leases import Leases
from services.metrics import events
from services.records.jobs import Job
from services.status import JOB_TRANSITIONS, JobStatus, guarded_update
from worker.engine.copy import CopyStats
from worker.engine.qos import Pacer
from worker.managers import notices
from worker.managers.claim import ClaimedJob
from worker.managers.limits_watch import LimitsWatch
from worker.managers.phases import Phases
from worker.managers.signals import JobCancelled, JobLost

log = logging.getLogger(__name__)


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
