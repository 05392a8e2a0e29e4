"""Verification of a restore point: its kind's data path re-reads it (all, or a sample)
and checks every object or chunk with the check its restores and its reader make (an RBD
target's backup snapshot through the copy engine, with no target; a chunk target's chunks
through `object_download.verify`). The result, when it was verified and which objects are
corrupt, is recorded on the restore point; a corrupt one also fails the job, so monitoring
that watches failed jobs sees it."""

from __future__ import annotations

import json
import logging
from typing import Any

from sqlalchemy import select, update

from services import targets
from services.base import utcnow
from services.errors import DataCorrupt
from services.metrics import events
from services.records.restore_points import RestorePoint
from services.status import VerifyStatus
from worker.managers.claim import ClaimedJob
from worker.managers.drive import JobSteps, Outcome, drive
from worker.managers.lifecycle import run_job
from worker.managers.reporter import JobReporter
from worker.managers.restore_point_steps import load_restore_point
from worker.runtime import Runtime
from worker.targets import data_path_of

log = logging.getLogger(__name__)

LISTED_CORRUPT_OBJECTS = 100
"""Corrupt object indexes kept on the restore point (the count is always exact)."""


def run_verify(rt: Runtime, job_id: str) -> None:
    run_job(rt, job_id, "verify",
            lambda job, reporter: drive(job, reporter, VerifySteps(rt, job, reporter)))


class VerifySteps(JobSteps):
    """Reads only: nothing to undo. Finding corruption is the verify's result, recorded on
    the restore point, and fails the job so monitoring that watches failed jobs sees it."""

    noun = "verify"

    def __init__(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
        self.rt, self.job, self.reporter = rt, job, reporter
        self.rp = load_restore_point(rt, job.restore_point_id)

    def work(self) -> Outcome:
        rt, rp = self.rt, self.rp
        fraction = self.job.verify_fraction
        try:
            stats, corrupt = data_path_of(rt.settings, rp.target).verify(
                rt, self.reporter, rp, fraction)
        except DataCorrupt as exc:  # the manifest or the snapshot itself is gone or damaged
            _record(rt, rp, [], exc.message, fraction)
            raise
        _record(rt, rp, corrupt, None, fraction)
        if not corrupt:
            return Outcome(stats=stats)
        offsets = ", ".join(str(i) for i in corrupt[:10])
        unit = targets.get(rt.settings, rp.target).unit
        return Outcome(stats=stats, error_code="data_corrupt",
                       error_message=f"{len(corrupt)} {unit}(s) of restore point {rp.id} are "
                       f"missing or do not match their checksums ({unit} indexes {offsets}"
                       f"{', ...' if len(corrupt) > 10 else ''}); the restore point is "
                       "marked corrupt. Restore from another restore point.")


def _record(rt: Runtime, rp: RestorePoint, corrupt: list[int], reason: str | None,
            fraction: float | None) -> None:
    now = utcnow()
    values: dict[str, Any] = {
        "verified_at": now,
        "verify_mode": "full" if fraction is None else "sampled",
        "verify_status": VerifyStatus.CORRUPT if corrupt or reason else VerifyStatus.OK,
        "corrupt_object_count": len(corrupt),
        "corrupt_objects": json.dumps(corrupt[:LISTED_CORRUPT_OBJECTS]),
    }
    if fraction is None:
        values["verified_full_at"] = now
    with rt.db.session() as session:
        before = session.scalar(select(RestorePoint.verify_status)
                                .where(RestorePoint.id == rp.id))
        if fraction is not None and values["verify_status"] == VerifyStatus.OK \
                and before == VerifyStatus.CORRUPT:
            # A clean sample says nothing about the objects it did not read: an earlier
            # finding of corruption stands until a full verify clears it.
            for key in ("verify_status", "corrupt_object_count", "corrupt_objects"):
                values.pop(key)
        session.execute(update(RestorePoint).where(RestorePoint.id == rp.id).values(**values))
    found = VerifyStatus.CORRUPT if corrupt or reason else VerifyStatus.OK
    events.verify_results.labels(rp.project_id, found.value).inc()
