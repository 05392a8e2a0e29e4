"""Backup of one volume into its target pool: snapshot the source, copy the snapshot's data
onto the backup image, checksum it, snapshot the backup image. The restore point becomes
`available` only after all of that; a failure removes what the attempt made."""

from __future__ import annotations

import logging
import re

import rados

from services.base import utcnow
from services.errors import CairnError, JobLost, NotFound
from services.restore_points.models import RestorePoint
from services.status import RESTORE_POINT_TRANSITIONS, JobStatus, RestorePointStatus, guarded_update
from services.storage import rbd_images
from services.volumes.models import Volume
from worker.engine import manifest
from worker.engine.copy import CopyEngine, CopyStats
from worker.engine.extents import allocated_objects, plan_chunks
from worker.managers.lifecycle import ClaimedJob, JobReporter, failure_reason, run_job
from worker.runtime import Runtime

log = logging.getLogger(__name__)

_CAIRN_SNAPSHOT = re.compile(r"^cairn\.[0-9a-f-]{36}$")


def run_backup(rt: Runtime, job_id: str) -> None:
    run_job(rt.db, rt.name, job_id, "backup", rt.settings.progress_interval_seconds,
            lambda job, reporter: _run(rt, job, reporter))


def _run(rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
    with rt.db.session() as session:
        rp = session.get(RestorePoint, job.restore_point_id)
        assert rp is not None
        volume = rp.volume
        session.expunge_all()
    if job.out_of_attempts:
        _clean_up(rt, rp, volume)
        _record_failure(rt, reporter, rp, "worker_lost",
                        f"the worker running this backup stopped {job.max_attempts} times; "
                        "gave up (the partial copy was removed). Check the workers' health "
                        "and start the backup again.")
        return
    try:
        stats = _copy(rt, job, reporter, rp, volume)
    except JobLost:
        raise  # not ours any more: nothing to clean up or record
    except BaseException as exc:
        _clean_up(rt, rp, volume)
        code, message = failure_reason(exc)
        _record_failure(rt, reporter, rp, code, f"backup failed: {message}")
        if not isinstance(exc, CairnError):
            raise
        return
    reporter.finish(JobStatus.SUCCEEDED, stats=stats)


def _copy(rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
          volume: Volume) -> CopyStats:
    target = rt.settings.backup_targets[rp.target]
    engine = CopyEngine(window=rt.settings.copy_window,
                        bytes_per_second=job.qos_bytes_per_second,
                        on_progress=reporter.progress)
    with rt.clusters.ioctx(volume.cluster, volume.pool) as src_io, \
            rt.clusters.ioctx(target.cluster, target.pool) as dst_io:
        _remove_backup_leftovers(dst_io, rp)
        try:
            with rbd_images.open_image(src_io, volume.image) as head:
                # A retry reuses the snapshot of the first attempt: the restore point's
                # time is when that snapshot was taken.
                rbd_images.ensure_snapshot(head, rp.snapshot)
        except NotFound:
            raise NotFound(f"the volume {volume.ref!r} no longer exists") from None
        with rbd_images.open_image(src_io, volume.image, snapshot=rp.snapshot,
                                   read_only=True) as source:
            size = source.size()
            object_size = 1 << source.stat()["order"]
            try:
                rbd_images.create_image(dst_io, rp.backup_image, size,
                                        order=source.stat()["order"],
                                        metadata={"cairn.volume_id": volume.id,
                                                  "cairn.volume": volume.ref,
                                                  "cairn.project_id": volume.project_id})
            except CairnError as exc:
                if exc.code != "image_exists":
                    raise
            with rbd_images.open_image(dst_io, rp.backup_image) as backup:
                if backup.size() != size:
                    backup.resize(size)
                # A full copy makes the backup image's head equal the snapshot: write what
                # the source holds, clear what only the head still holds (from the previous
                # restore point or an interrupted attempt).
                chunks = plan_chunks(size, object_size,
                                     allocated_objects(source, size, object_size),
                                     allocated_objects(backup, size, object_size))
                record = manifest.Manifest(object_size, size)
                reporter.start_copy(sum(c.length for c in chunks if c.in_source))
                stats = engine.run(source, backup, chunks, record=record)
                backup.flush()
                manifest.store(dst_io, rp.manifest_object, record)
                reporter.check()
                rbd_images.ensure_snapshot(backup, rp.snapshot)
        with rt.db.session() as session:
            ok = guarded_update(
                session, RestorePoint, rp.id, RESTORE_POINT_TRANSITIONS,
                RestorePointStatus.AVAILABLE, expect=RestorePointStatus.CREATING,
                extra={"size_bytes": size, "bytes_copied": stats.bytes_written,
                       "duration_seconds": stats.elapsed, "completed_at": utcnow(),
                       "checksum_algorithm": manifest.ALGORITHM,
                       "objects_checksummed": len(record.digests), "status_reason": None},
            )
            if not ok:
                raise JobLost(f"restore point {rp.id} is no longer being created")
        # Every source snapshot costs the tenant's VM copy-on-write: keep only the newest.
        _remove_older_source_snapshots(src_io, volume.image, keep=rp.snapshot)
    return stats


def _remove_backup_leftovers(dst_io: rados.Ioctx, rp: RestorePoint) -> None:
    """An interrupted attempt may have left the snapshot or manifest of this restore point
    (it never became available, so they are not trusted), and the lock of its dead worker
    on the backup image (the active-backup index makes this job the image's only writer)."""
    try:
        with rbd_images.open_image(dst_io, rp.backup_image) as backup:
            rbd_images.break_locks(backup)
            rbd_images.remove_snapshot(backup, rp.snapshot)
    except NotFound:
        pass
    manifest.remove(dst_io, rp.manifest_object)


def _remove_older_source_snapshots(src_io: rados.Ioctx, image: str, keep: str) -> None:
    with rbd_images.open_image(src_io, image) as head:
        for name in rbd_images.snapshot_names(head):
            if name != keep and _CAIRN_SNAPSHOT.match(name):
                rbd_images.remove_snapshot(head, name)


def _clean_up(rt: Runtime, rp: RestorePoint, volume: Volume) -> None:
    """Remove what a failed backup made: its snapshots, its manifest, and the backup image
    when it holds no restore point. Errors here are logged and the failure reason stays the
    original one; the reconciler finds whatever is left by its name."""
    target = rt.settings.backup_targets[rp.target]
    try:
        with rt.clusters.ioctx(target.cluster, target.pool) as dst_io:
            _remove_backup_leftovers(dst_io, rp)
            try:
                with rbd_images.open_image(dst_io, rp.backup_image) as backup:
                    empty = not rbd_images.snapshot_names(backup)
                if empty:
                    rbd_images.remove_image(dst_io, rp.backup_image)
            except NotFound:
                pass
        with rt.clusters.ioctx(volume.cluster, volume.pool) as src_io:
            try:
                with rbd_images.open_image(src_io, volume.image) as head:
                    rbd_images.remove_snapshot(head, rp.snapshot)
            except NotFound:
                pass
    except Exception:
        log.exception("cleaning up after failed backup %s", rp.id)


def _record_failure(rt: Runtime, reporter: JobReporter, rp: RestorePoint, code: str,
                    message: str) -> None:
    with rt.db.session() as session:
        guarded_update(session, RestorePoint, rp.id, RESTORE_POINT_TRANSITIONS,
                       RestorePointStatus.ERROR, expect=RestorePointStatus.CREATING,
                       extra={"status_reason": message})
    reporter.finish(JobStatus.FAILED, error_code=code, error_message=message)
