"""The worker's half of an RBD pool target (`services/targets/rbd_pool.py`): a backup
copies the source snapshot onto the volume's backup image and snapshots it
(`worker/managers/backup.py`); a restore and a verify read that snapshot with the copy
engine, checking every object against the RADOS manifest, and so does a reader, an object
at a time (`worker/engine/rbd_reader.py`); a delete removes the snapshot, the manifest
and, once no restore point is left on it, the backup image, and afterwards frees what the
image's head still held of the newest one (`worker/managers/backup_image.py`)."""

from __future__ import annotations

import math
import random
from contextlib import ExitStack
from functools import partial

import rbd
from sqlalchemy import func, select

from services import targets
from services.errors import CairnError, DataCorrupt, NotFound, RestorePointBusy
from services.quotas import chains
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import RestorePointStatus
from services.storage import rbd_images
from services.storage.refs import ImageRef
from worker.engine import manifest
from worker.engine.block_reader import DEFAULT_CACHE_BYTES
from worker.engine.copy import CopyEngine, CopyStats
from worker.engine.extents import Chunk, allocated_objects, plan_chunks
from worker.engine.manifest import Manifest
from worker.engine.rbd_reader import RbdReader
from worker.managers.backup import BackupSteps
from worker.managers.backup_image import release_head
from worker.managers.claim import ClaimedJob
from worker.managers.destination import prepare_destination
from worker.managers.drive import Aftercare, JobSteps
from worker.managers.measure_rbd import RbdHeld
from worker.managers.reporter import JobReporter
from worker.runtime import Runtime
from worker.targets.reader import RestorePointReader


class RbdPoolPath:
    def backup(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> JobSteps:
        return BackupSteps(rt, job, reporter)

    def restore(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
                dest: ImageRef, *, create: bool) -> CopyStats:
        return _restore(rt, job, reporter, rp, dest, create=create)

    def verify(self, rt: Runtime, reporter: JobReporter, rp: RestorePoint,
               fraction: float | None) -> tuple[CopyStats, list[int]]:
        return _verify(rt, reporter, rp, fraction)

    def reader(self, rt: Runtime, rp: RestorePoint, *,
               cache_bytes: int = DEFAULT_CACHE_BYTES) -> RestorePointReader:
        return _reader(rt, rp, cache_bytes)

    def delete(self, rt: Runtime, rp: RestorePoint) -> None:
        _delete(rt, rp)

    def after_delete(self, rt: Runtime, rp: RestorePoint, volume: Volume, job_id: str, *,
                     locked: bool) -> Aftercare:
        return [("freeing what the backup image's head held of it",
                 lambda: release_head(rt, rp, volume, job_id, locked=locked))]

    def measure(self, rt: Runtime, rp: RestorePoint) -> chains.Measure:
        return RbdHeld(rt, rp.target, rp.volume_id, head_of=rp.id)


def _restore(rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
             dest: ImageRef, *, create: bool) -> CopyStats:
    phases = reporter.phases
    phases.restart()
    with ExitStack() as stack:
        recorded, source = _backup_snapshot(stack, rt, rp, missing=NotFound)
        dest_io = stack.enter_context(rt.clusters.ioctx(dest.cluster, dest.pool))
        size = source.size()
        order = source.stat()["order"]
        object_size = 1 << order
        recorded.check_shape(size, object_size)
        destination = prepare_destination(stack, dest_io, dest, job, rp.id, size, order=order,
                                          create=create)
        restored, start, fresh = destination.image, destination.start, destination.fresh
        # A fresh image holds nothing, and diffing it would load its object map into this
        # handle before the engine could mark the objects it writes (as in a backup).
        # Every object the manifest names is read and checked, also one the backup
        # image's allocation map omits (lost, or a damaged map): it must fail the restore,
        # not come back as zeros.
        plan = plan_chunks(size, object_size,
                           allocated_objects(source, size, object_size) | set(recorded.digests),
                           set() if fresh else allocated_objects(restored, size, object_size))
        phases.lap("open")  # with the listing of what to copy
        chunks = [c for c in plan if c.index >= start]
        resumed = sum(c.length for c in plan if c.index < start and c.in_source)
        engine = CopyEngine(window=rt.settings.copy_window, pacer=reporter.pacer,
                            on_progress=reporter.progress)
        reporter.on_persist = destination.checkpoint
        reporter.start_copy(resumed + sum(c.length for c in chunks if c.in_source), resumed,
                            engine.window)
        stats = engine.run(source, restored, chunks, verify=recorded, resumed_bytes=resumed,
                           new_target_pool=dest_io if fresh else None)
        destination.finish()
    phases.lap("copy")
    return stats


def _verify(rt: Runtime, reporter: JobReporter, rp: RestorePoint,
            fraction: float | None) -> tuple[CopyStats, list[int]]:
    with ExitStack() as stack:
        recorded, source = _backup_snapshot(stack, rt, rp)
        size = source.size()
        object_size = 1 << source.stat()["order"]
        recorded.check_shape(size, object_size)
        # Objects with data, and objects the manifest expects data in (a lost object
        # reads as zeros and must be reported, not skipped).
        chunks = plan_chunks(size, object_size, allocated_objects(source, size, object_size),
                             recorded.digests)
        if fraction is not None:
            chunks = sample(chunks, fraction)
        corrupt: list[int] = []
        engine = CopyEngine(window=rt.settings.copy_window, pacer=reporter.pacer,
                            on_progress=reporter.progress)
        reporter.start_copy(sum(c.length for c in chunks if c.in_source), 0, engine.window)
        stats = engine.run(source, None, chunks, verify=recorded, corrupt=corrupt)
    return stats, sorted(corrupt)


def _reader(rt: Runtime, rp: RestorePoint, cache_bytes: int) -> RbdReader:
    """The backup image open at the restore point's snapshot until the reader closes;
    each object read is checked as restore and verify check it (`Manifest.check`)."""
    target = targets.snapshotted(rt.settings, rp.target)
    with ExitStack() as stack:
        recorded, image = _backup_snapshot(stack, rt, rp)
        boundary = partial(rt.clusters.boundary, target.cluster, target.pool,
                           rt.clusters.handle(target.cluster))
        reader = RbdReader(image, recorded, boundary=boundary, cache_bytes=cache_bytes,
                           window=rt.settings.copy_window)
        reader.on_close(stack.pop_all().close)
    return reader


def _backup_snapshot(stack: ExitStack, rt: Runtime, rp: RestorePoint, *,
                     missing: type[CairnError] = DataCorrupt) -> tuple[Manifest, rbd.Image]:
    """The restore point's manifest, and its backup image opened read-only at the backup
    snapshot, held by `stack` (with the pool's ioctx: Ceph's errors inside leave as
    Cairn's). A missing manifest is DataCorrupt; a missing snapshot `missing`: corruption
    to a verify and a reader, NotFound to a restore."""
    target = targets.snapshotted(rt.settings, rp.target)
    backup_io = stack.enter_context(rt.clusters.ioctx(target.cluster, target.pool))
    recorded = manifest.load(backup_io, rp.manifest_object)
    try:
        image = stack.enter_context(rbd_images.open_image(
            backup_io, rp.backup_image, snapshot=rp.snapshot, read_only=True))
    except NotFound:
        raise missing(f"the backup snapshot of restore point {rp.id} is missing from the "
                      f"backup pool {target.pool!r}") from None
    return recorded, image


def sample(chunks: list[Chunk], fraction: float) -> list[Chunk]:
    """A random `fraction` of the chunks (at least one), in object order: a new draw each
    time, so successive sampled verifies cover different objects."""
    if not chunks:
        return chunks
    count = max(1, math.ceil(len(chunks) * fraction))
    if count >= len(chunks):
        return chunks
    return sorted(random.sample(chunks, count), key=lambda c: c.index)


def _delete(rt: Runtime, rp: RestorePoint) -> None:
    target = targets.snapshotted(rt.settings, rp.target)
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
