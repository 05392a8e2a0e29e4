"""Deletion of a restore point: its backup snapshot, its manifest, its source snapshot if
it is still the volume's newest, and the backup image once no restore point is left on it.
RBD snapshots are independent, so any restore point can go in any order."""

from __future__ import annotations

import logging

from sqlalchemy import func, select

from services.base import utcnow
from services.errors import CairnError, JobLost, NotFound
from services.restore_points.models import RestorePoint
from services.status import RESTORE_POINT_TRANSITIONS, JobStatus, RestorePointStatus, guarded_update
from services.storage import rbd_images
from services.volumes.models import Volume
from worker.engine import manifest
from worker.managers.lifecycle import ClaimedJob, JobReporter, failure_reason, run_job
from worker.runtime import Runtime

log = logging.getLogger(__name__)


def run_delete(rt: Runtime, job_id: str) -> None:
    run_job(rt, job_id, "delete", lambda job, reporter: _run(rt, job, reporter))


def _run(rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
    with rt.db.session() as session:
        rp = session.get(RestorePoint, job.restore_point_id)
        assert rp is not None
        volume = rp.volume
        session.expunge_all()
    try:
        delete_restore_point(rt, rp, volume)
    except JobLost:
        raise  # not ours any more: nothing to clean up or record
    except BaseException as exc:
        code, message = failure_reason(exc)
        message = f"deleting the restore point failed: {message}; delete it again to retry"
        with rt.db.session() as session:
            guarded_update(session, RestorePoint, rp.id, RESTORE_POINT_TRANSITIONS,
                           RestorePointStatus.ERROR, expect=RestorePointStatus.DELETING,
                           extra={"status_reason": message})
        reporter.finish(JobStatus.FAILED, error_code=code, error_message=message)
        if not isinstance(exc, CairnError):
            raise
        return
    reporter.finish(JobStatus.SUCCEEDED)


def delete_restore_point(rt: Runtime, rp: RestorePoint, volume: Volume) -> None:
    """Remove a `deleting` restore point's data and mark it deleted."""
    _delete(rt, rp, volume)
    with rt.db.session() as session:
        if not guarded_update(session, RestorePoint, rp.id, RESTORE_POINT_TRANSITIONS,
                              RestorePointStatus.DELETED, expect=RestorePointStatus.DELETING,
                              extra={"deleted_at": utcnow()}):
            raise JobLost(f"restore point {rp.id} is no longer being deleted")


def _delete(rt: Runtime, rp: RestorePoint, volume: Volume) -> None:
    target = rt.settings.backup_targets[rp.target]
    with rt.clusters.ioctx(target.cluster, target.pool) as dst_io:
        try:
            with rbd_images.open_image(dst_io, rp.backup_image) as backup:
                rbd_images.remove_snapshot(backup, rp.snapshot)
                left = rbd_images.snapshot_names(backup)
        except NotFound:
            left = []
        manifest.remove(dst_io, rp.manifest_object)
        if not left and not _others_on_image(rt, rp):
            rbd_images.remove_image(dst_io, rp.backup_image)
    try:
        with rt.clusters.ioctx(volume.cluster, volume.pool) as src_io, \
                rbd_images.open_image(src_io, volume.image) as head:
            rbd_images.remove_snapshot(head, rp.snapshot)
    except NotFound:
        pass  # the source volume is gone: its snapshots went with it


def _others_on_image(rt: Runtime, rp: RestorePoint) -> bool:
    """Whether another live restore point (e.g. a backup running now) uses the image."""
    with rt.db.session() as session:
        count = session.scalar(
            select(func.count()).select_from(RestorePoint).where(
                RestorePoint.volume_id == rp.volume_id,
                RestorePoint.target == rp.target,
                RestorePoint.id != rp.id,
                RestorePoint.status != RestorePointStatus.DELETED,
            )
        )
    return bool(count)
