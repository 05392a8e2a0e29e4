"""Deletion of a restore point: its backup snapshot, its manifest, its source snapshot if
it is still the volume's newest, and the backup image once no restore point is left on it.
RBD snapshots are independent, so any restore point can go in any order."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from services.base import utcnow
from services.errors import RestorePointBusy
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import RESTORE_POINT_TRANSITIONS, JobStatus, RestorePointStatus, guarded_update
from worker.managers.claim import ClaimedJob
from worker.managers.drive import Aftercare, JobSteps, Outcome, drive, failure_reason
from worker.managers.lifecycle import run_job
from worker.managers.quota_guard import settle_deleted
from worker.managers.restore_point_steps import load_restore_point
from worker.managers.source_snapshots import remove_source_snapshot
from worker.runtime import Runtime
from worker.targets import DataPath, data_path_of

log = logging.getLogger(__name__)


def run_delete(rt: Runtime, job_id: str) -> None:
    run_job(rt, job_id, "delete",
            lambda job, reporter: drive(job, reporter, DeleteSteps(rt, job)))


class DeleteSteps(JobSteps):
    """The one job that removes an available restore point's data (asked for by a user;
    prunes call `delete_restore_point` under the volume's lock). A failure leaves the
    restore point `error`, to be deleted again."""

    noun = "delete"

    def __init__(self, rt: Runtime, job: ClaimedJob) -> None:
        self.rt, self.job = rt, job
        self.rp = load_restore_point(rt, job.restore_point_id)
        self.volume = self.rp.volume

    def work(self) -> Outcome:
        delete_restore_point(self.rt, self.rp, self.volume)
        return Outcome()

    def aftercare(self, outcome: Outcome) -> Aftercare:
        return data_path_of(self.rt.settings, self.rp.target).after_delete(
            self.rt, self.rp, self.volume, self.job.id, locked=False)

    def message(self, exc: BaseException) -> str:
        _code, message = failure_reason(exc)
        return f"deleting the restore point failed: {message}; delete it again to retry"

    def record_failure(self, status: JobStatus, code: str, message: str) -> None:
        with self.rt.db.session() as session:
            settle_refused_delete(session, self.rp.id, code, message)


def settle_refused_delete(session: Session, rp_id: str, code: str, message: str) -> None:
    """A `deleting` restore point whose delete failed: `available` again when the delete
    was refused before it removed anything (it is whole), else `error`."""
    if code == RestorePointBusy.code:
        guarded_update(session, RestorePoint, rp_id, RESTORE_POINT_TRANSITIONS,
                       RestorePointStatus.AVAILABLE, expect=RestorePointStatus.DELETING,
                       extra={"status_reason": None})
        return
    guarded_update(session, RestorePoint, rp_id, RESTORE_POINT_TRANSITIONS,
                   RestorePointStatus.ERROR, expect=RestorePointStatus.DELETING,
                   extra={"status_reason": message})


def delete_restore_point(rt: Runtime, rp: RestorePoint, volume: Volume) -> None:
    """Remove a `deleting` restore point's data and mark it deleted, with its chain's
    storage figures made exact again in the same unit of work: what later restore points
    still hold of its data stays counted, what went with it does not
    (`services/quotas/chains.py`)."""
    path = data_path_of(rt.settings, rp.target)
    _delete(rt, rp, volume, path)
    settle_deleted(rt, rp, {"deleted_at": utcnow()}, lambda: path.measure(rt, rp))


def _delete(rt: Runtime, rp: RestorePoint, volume: Volume, path: DataPath) -> None:
    path.delete(rt, rp)
    remove_source_snapshot(rt, volume, rp)


