"""One thread per worker process that reads the QoS limits and cancel requests of every job
the process runs, in one query each POLL_SECONDS. Each job polling for itself cost a session
a job four times a second (a pool ping, BEGIN, the SELECT, COMMIT): at 20 jobs in flight 80
sessions a second, a fifth of a fleet night's worker samples and PostgreSQL's CPU besides
(bench/README.md, nightly fleet)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Protocol

from sqlalchemy import select

from services.db import Database
from services.records.jobs import Job

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25
"""How often the running jobs' rows are read: an operator's QoS change or cancel takes effect
well within a second."""


class Watched(Protocol):
    """A running job, as the watch sees it (the job's reporter)."""

    @property
    def job_id(self) -> str: ...

    def follow_limits(self, bps: int | None, iops: int | None,
                      cancel_at: datetime | None) -> None: ...


class LimitsWatch:
    """Held by the worker's runtime beside its database; its thread starts with the first
    job and then sleeps whenever no job runs."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._jobs: dict[str, Watched] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._failing = False

    def add(self, job: Watched) -> None:
        with self._lock:
            self._jobs[job.job_id] = job
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="job-limits",
                                                daemon=True)
                self._thread.start()

    def remove(self, job: Watched) -> None:
        with self._lock:
            if self._jobs.get(job.job_id) is job:
                del self._jobs[job.job_id]

    def _run(self) -> None:
        while True:
            time.sleep(POLL_SECONDS)
            with self._lock:
                watched = dict(self._jobs)
            if not watched:
                continue
            try:
                self.poll(watched)
            except Exception:
                # The database may be briefly away: limits and cancels wait for it; the
                # heartbeat, which fails the same way, decides what happens to the jobs.
                if not self._failing:
                    log.warning("could not read the running jobs' limits", exc_info=True)
                self._failing = True
            else:
                self._failing = False

    def poll(self, watched: dict[str, Watched]) -> None:
        with self.db.reading() as session:
            rows = session.execute(
                select(Job.id, Job.qos_bytes_per_second, Job.qos_ops_per_second,
                       Job.cancel_requested_at).where(Job.id.in_(sorted(watched)))).all()
        for job_id, bps, iops, cancel_at in rows:
            watched[job_id].follow_limits(bps, iops, cancel_at)
