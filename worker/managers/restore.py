"""Restore of a restore point into a new RBD image with the copy engine (sparse, parallel,
QoS-paced), every object checked against the manifest as it is read. A retry after a crash
resumes into the image the job created; a failure or cancel removes it."""

from __future__ import annotations

import logging
from contextlib import ExitStack

import rados

from services.errors import CairnError, ImageExists, JobCancelled, JobLost, NotFound
from services.restore_points.models import RestorePoint
from services.status import JobStatus
from services.storage import rbd_images
from services.volumes.refs import ImageRef, parse_image_ref
from worker.engine import manifest
from worker.engine.copy import CopyEngine, CopyStats
from worker.engine.extents import allocated_objects, plan_chunks
from worker.managers.lifecycle import (
    ClaimedJob,
    JobReporter,
    end_status,
    failure_reason,
    run_job,
)
from worker.runtime import Runtime

log = logging.getLogger(__name__)

JOB_KEY = "cairn.restore_job"
CHECKPOINT_KEY = "cairn.restore_checkpoint"
"""Image metadata: the object index before which the restore is complete."""


def run_restore(rt: Runtime, job_id: str) -> None:
    run_job(rt, job_id, "restore", lambda job, reporter: _run(rt, job, reporter))


def _run(rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
    with rt.db.session() as session:
        rp = session.get(RestorePoint, job.restore_point_id)
        assert rp is not None
        assert job.restore_target is not None
        session.expunge_all()
    dest = parse_image_ref(job.restore_target, field="target")
    if job.out_of_attempts:
        _remove_own_image(rt, dest, job.id)
        reporter.finish(JobStatus.FAILED, error_code="worker_lost",
                        error_message=f"the worker running this restore stopped "
                        f"{job.max_attempts} times; gave up and removed the partial image")
        return
    try:
        reporter.check()
        stats = _restore(rt, job, reporter, rp, dest)
    except JobLost:
        raise  # not ours any more: nothing to clean up or record
    except BaseException as exc:
        if not isinstance(exc, ImageExists):
            _remove_own_image(rt, dest, job.id)
        code, message = failure_reason(exc)
        if not isinstance(exc, JobCancelled):
            message = f"restore failed: {message}"
        reporter.finish(end_status(exc), error_code=code, error_message=message)
        if not isinstance(exc, CairnError):
            raise
        return
    reporter.finish(JobStatus.SUCCEEDED, stats=stats)


def _restore(rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
             dest: ImageRef) -> CopyStats:
    target = rt.settings.backup_targets[rp.target]
    with ExitStack() as stack:
        backup_io = stack.enter_context(rt.clusters.ioctx(target.cluster, target.pool))
        dest_io = stack.enter_context(rt.clusters.ioctx(dest.cluster, dest.pool))
        recorded = manifest.load(backup_io, rp.manifest_object)
        try:
            source = stack.enter_context(rbd_images.open_image(
                backup_io, rp.backup_image, snapshot=rp.snapshot, read_only=True))
        except NotFound:
            raise NotFound(f"the backup snapshot of restore point {rp.id} is missing from "
                           f"the backup pool {target.pool!r}") from None
        size = source.size()
        order = source.stat()["order"]
        object_size = 1 << order
        start = _resume_point(dest_io, dest.image, job) if job.attempt > 1 else None
        if start is None:
            start = 0
            rbd_images.create_image(dest_io, dest.image, size, order=order,
                                    metadata={JOB_KEY: job.id, "cairn.restore_point": rp.id})
        restored = stack.enter_context(rbd_images.open_image(dest_io, dest.image))
        plan = plan_chunks(size, object_size, allocated_objects(source, size, object_size),
                           allocated_objects(restored, size, object_size))
        chunks = [c for c in plan if c.index >= start]
        resumed = sum(c.length for c in plan if c.index < start and c.in_source)
        engine = CopyEngine(window=rt.settings.copy_window, pacer=reporter.pacer,
                            on_progress=reporter.progress)
        reporter.on_persist = lambda stats: restored.metadata_set(
            CHECKPOINT_KEY, str(stats.resume_index))
        reporter.start_copy(resumed + sum(c.length for c in chunks if c.in_source), resumed,
                            engine.window)
        stats = engine.run(source, restored, chunks, verify=recorded, resumed_bytes=resumed)
        restored.flush()
        if rbd_images.metadata(restored, CHECKPOINT_KEY) is not None:
            restored.metadata_remove(CHECKPOINT_KEY)
    return stats


def _resume_point(ioctx: rados.Ioctx, name: str, job: ClaimedJob) -> int | None:
    """Where an earlier attempt of this job stopped, in the image it created; None when
    there is no such image (the earlier attempt died before creating it)."""
    try:
        with rbd_images.open_image(ioctx, name) as image:
            if rbd_images.metadata(image, JOB_KEY) != job.id:
                raise ImageExists(f"an RBD image {name!r} appeared in the restore's place; "
                                  "it is not this job's and is left alone")
            rbd_images.break_locks(image)
            saved = rbd_images.metadata(image, CHECKPOINT_KEY)
    except NotFound:
        return None
    return int(saved) if saved else 0


def _remove_if_ours(ioctx: rados.Ioctx, name: str, job_id: str) -> None:
    try:
        with rbd_images.open_image(ioctx, name) as image:
            ours = rbd_images.metadata(image, JOB_KEY) == job_id
            if ours:
                rbd_images.break_locks(image)
    except NotFound:
        return
    if ours:
        rbd_images.remove_image(ioctx, name)


def _remove_own_image(rt: Runtime, dest: ImageRef, job_id: str) -> None:
    """Remove the image this job created (never one it did not: it may be a user's)."""
    try:
        with rt.clusters.ioctx(dest.cluster, dest.pool) as ioctx:
            _remove_if_ours(ioctx, dest.image, job_id)
    except Exception:
        log.exception("removing the partial image %s of restore job %s", dest, job_id)
