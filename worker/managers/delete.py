"""Deletion of a restore point: its backup snapshot, its manifest, its source snapshot if
it is still the volume's newest, and the backup image once no restore point is left on it.
RBD snapshots are independent, so any restore point can go in any order."""

from __future__ import annotations

import logging

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.base import utcnow
from services.errors import NotFound, RestorePointBusy
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.settings import is_object_target, rbd_target
from services.status import RESTORE_POINT_TRANSITIONS, JobStatus, RestorePointStatus, guarded_update
from services.storage import rbd_images
from worker.engine import manifest
from worker.managers.backup import release_head
from worker.managers.claim import ClaimedJob
from worker.managers.drive import Aftercare, JobSteps, Outcome, drive, failure_reason
from worker.managers.lifecycle import run_job
from worker.managers.object_stores import remove_manifest
from worker.managers.quota_guard import settle_deleted
from worker.runtime import Runtime

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
        with rt.db.session() as session:
            rp = session.get(RestorePoint, job.restore_point_id)
            assert rp is not None
            self.volume = rp.volume
            session.expunge_all()
        self.rt, self.rp, self.job = rt, rp, job

    def work(self) -> Outcome:
        delete_restore_point(self.rt, self.rp, self.volume)
        return Outcome()

    def aftercare(self, outcome: Outcome) -> Aftercare:
        if is_object_target(self.rt.settings, self.rp.target):
            return []
        return [("freeing what the backup image's head held of it",
                 lambda: release_head(self.rt, self.rp, self.volume, self.job.id,
                                      locked=False))]

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
    _delete(rt, rp, volume)
    settle_deleted(rt, rp, {"deleted_at": utcnow()})


def _delete(rt: Runtime, rp: RestorePoint, volume: Volume) -> None:
    if is_object_target(rt.settings, rp.target):
        # The manifest goes; its chunks stay until a garbage collection finds no other
        # manifest naming them (ADR 0007). No key is needed for that: a restore point is
        # deleted even from a target whose key is lost.
        remove_manifest(rt.settings, rp.target, rp.project_id, rp.id)
    else:
        _delete_from_pool(rt, rp)
    try:
        with rt.clusters.ioctx(volume.cluster, volume.pool) as src_io, \
                rbd_images.open_image(src_io, volume.image) as head:
            rbd_images.remove_snapshot(head, rp.snapshot)
    except NotFound:
        pass  # the source volume is gone: its snapshots went with it


def _delete_from_pool(rt: Runtime, rp: RestorePoint) -> None:
    target = rbd_target(rt.settings, rp.target)
    with rt.clusters.ioctx(target.cluster, target.pool) as dst_io:
        clones = rbd_images.snapshot_children(dst_io, rp.backup_image, rp.snapshot)
        if clones:
            # librbd would move the snapshot to its trash and keep it for the clones; the
            # restore point would be gone from Cairn with its data still held.
            raise RestorePointBusy(
                f"restore point {rp.id} still backs {', '.join(clones)} (an instant restore "
                "whose flatten did not finish): that volume reads its unchanged data from "
                "it. Flatten it (rbd flatten), or delete it, then delete the restore point "
                "again", restore_point_id=rp.id)
        try:
            with rbd_images.open_image(dst_io, rp.backup_image) as backup:
                rbd_images.remove_snapshot(backup, rp.snapshot)
                left = rbd_images.snapshot_names(backup)
        except NotFound:
            left = []
        manifest.remove(dst_io, rp.manifest_object)
        if not left and not _others_on_image(rt, rp):
            rbd_images.remove_image(dst_io, rp.backup_image)


def _others_on_image(rt: Runtime, rp: RestorePoint) -> bool:
    """Whether a backup being made now (a `creating` restore point of the volume on the
    target) uses the image, which holds no snapshot any more. Every other restore point
    whose data is there has its snapshot there; one whose making failed, or whose own
    delete removed its snapshot meanwhile, does not keep the image (kept for it, the head
    would hold the deleted one's data for nobody)."""
    with rt.db.session() as session:
        count = session.scalar(
            select(func.count()).select_from(RestorePoint).where(
                RestorePoint.volume_id == rp.volume_id,
                RestorePoint.target == rp.target,
                RestorePoint.id != rp.id,
                RestorePoint.status == RestorePointStatus.CREATING,
            )
        )
    return bool(count)
