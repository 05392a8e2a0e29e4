"""What the jobs that make a restore point share: a backup (to any kind of target) and an
off-site copy. Their preamble reads the restore point once, detached from any session
(`load_restore_point`, which the jobs that only read one use too); their commit point is
the restore point turning `available` (`RestorePointSteps.committed`). Before it, a failure
removes what the attempt made and settles the restore point (`settle_unfinished`); after
it, nothing of the restore point is removed here (`drive`'s rule)."""

from __future__ import annotations

from sqlalchemy import select

from services.base import utcnow
from services.errors import QuotaExceeded
from services.records.restore_points import RestorePoint
from services.status import (
    RESTORE_POINT_TRANSITIONS,
    JobStatus,
    RestorePointStatus,
    guarded_update,
)
from worker.managers.claim import ClaimedJob
from worker.managers.drive import JobSteps
from worker.managers.reporter import JobReporter
from worker.runtime import Runtime


def load_restore_point(rt: Runtime, restore_point_id: str | None) -> RestorePoint:
    """The restore point a job works on, with its volume, as the job's start found it:
    detached, so the job's later steps read it without a session."""
    with rt.db.session() as session:
        rp = session.get(RestorePoint, restore_point_id)
        assert rp is not None, f"the job's restore point {restore_point_id} has no row"
        session.expunge_all()
    return rp


class RestorePointSteps(JobSteps):
    """Commit point: the job's restore point turns `available`. Before it, `undo` removes
    what the attempt made (`remove_partial`); after it, nothing of the restore point is
    ever removed here."""

    def __init__(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
        self.rt, self.job, self.reporter = rt, job, reporter
        self.rp = load_restore_point(rt, job.restore_point_id)
        self.cleaned = False
        """Whether the undo removed everything the job made."""

    def committed(self) -> bool:
        with self.rt.db.session() as session:
            status = session.scalar(select(RestorePoint.status)
                                    .where(RestorePoint.id == self.rp.id))
        return status == RestorePointStatus.AVAILABLE

    def remove_partial(self) -> str:
        """Remove what a failed attempt made (only ever before the commit point); returns
        what was done, for the job's reason."""
        raise NotImplementedError

    def undo(self) -> str:
        done = self.remove_partial()
        self.cleaned = True
        return done

    def record_failure(self, status: JobStatus, code: str, message: str) -> None:
        settle_unfinished(self.rt, self.rp.id, status, code, message, cleaned=self.cleaned)


def settle_unfinished(rt: Runtime, rp_id: str, status: JobStatus, code: str,
                      message: str, *, cleaned: bool) -> None:
    """A restore point whose making failed is `error` with the reason; a cancelled one, or
    one the project's quota had no room for, is gone too once the undo removed what it
    made (`cleaned`; it would count against the very quota that refused it). When the undo
    could not, it stays `error`, saying so, for the orphan reconciler to finish. Either way
    it holds none of the quota: what it wrote is removed or left to the reconciler."""
    gone = cleaned and (status == JobStatus.CANCELLED or code == QuotaExceeded.code)
    to = RestorePointStatus.DELETED if gone else RestorePointStatus.ERROR
    with rt.db.session() as session:
        guarded_update(session, RestorePoint, rp_id, RESTORE_POINT_TRANSITIONS, to,
                       expect=RestorePointStatus.CREATING,
                       extra={"status_reason": message, "quota_bytes": 0, "deleted_at": utcnow()
                              if to == RestorePointStatus.DELETED else None})
