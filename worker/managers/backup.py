"""A backup's steps (`BackupSteps`, which an object target's backup extends), and the backup
of one volume into an RBD pool: snapshot the source (`source_snapshots.py`), copy what the
snapshot holds (a full) or what changed since the previous restore point's snapshot (an
incremental) onto the volume's backup image (`backup_image.py`), checksum it, snapshot the
backup image. The restore point becomes `available` only after all of that; a failure or
cancel removes what the attempt made, and a retry after a crash resumes from the
checkpoint."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import ExitStack

import rados
import rbd

from services import targets
from services.base import utcnow
from services.errors import VolumeBusy, VolumeNotFound, VolumeNotOwned
from services.plans import offsite
from services.plans.prunes import request_prune
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import RestorePointKind
from services.storage import rbd_images
from services.volumes import locks
from services.volumes.ownership import check_owner
from worker.engine import checkpoint, manifest
from worker.engine.copy import CopyEngine, CopyStats, Digests, Unchanged
from worker.engine.extents import (
    allocated_objects,
    changed_objects,
    plan_chunks,
    resized_objects,
)
from worker.managers import backup_image, group_snapshots, quota_guard
from worker.managers.backup_image import Base
from worker.managers.claim import ClaimedJob
from worker.managers.drive import Aftercare, Outcome
from worker.managers.measure_rbd import RbdHeld
from worker.managers.quota_guard import QuotaGuard
from worker.managers.reporter import JobReporter
from worker.managers.restore_point_steps import RestorePointSteps
from worker.managers.side_by_side import side_by_side
from worker.managers.source_snapshots import (
    SourceSnapshotRemoval,
    open_source,
    remove_source_snapshot,
)
from worker.runtime import Runtime

log = logging.getLogger(__name__)

LOCK_WAIT_SECONDS = 120.0


class BackupSteps(RestorePointSteps):
    """A backup: under the volume's lock, everything up to the commit point (`copy`: here
    onto the volume's backup image in an RBD pool; `ObjectBackupSteps` sends chunks
    instead), then the aftercare every backup shares (its checkpoint, the older source
    snapshots, the run's group snapshot, the plan's prune and off-site copy)."""

    noun = "backup"

    def __init__(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
        super().__init__(rt, job, reporter)
        self.volume = self.rp.volume
        self.removal: SourceSnapshotRemoval | None = None
        self.disowned = False
        """Cinder refused: the volume is another project's now, or gone."""

    def work(self) -> Outcome:
        lock_volume(self.rt, self.job, self.reporter, self.volume)
        self.reporter.phases.lap("prepare")
        try:
            stats, self.removal = self.copy()
            return Outcome(stats=stats)
        finally:
            locks.unlock(self.rt.db, self.volume.id, self.job.id)

    def check_owner(self) -> bool | None:
        """Raise unless Cinder says the job's project still owns the volume; returns its
        `bootable` (None when unknown), so a restore into a new volume can say so too."""
        try:
            found = check_owner(self.rt.cinder, self.volume, self.job.project_id)
        except (VolumeNotOwned, VolumeNotFound):
            self.disowned = True
            raise
        return found.bootable if found else None

    def copy(self) -> tuple[CopyStats, SourceSnapshotRemoval]:
        """Everything up to and including the commit point."""
        return _copy(self.rt, self.job, self.reporter, self.rp, self.volume, self.check_owner)

    def clean_up(self) -> None:
        """Remove what a failed attempt made on the target and the source."""
        backup_image.clean_up(self.rt, self.rp)
        remove_source_snapshot(self.rt, self.volume, self.rp)

    def remove_checkpoint(self) -> None:
        backup_image.remove_checkpoint(self.rt, self.rp)

    def remove_partial(self) -> str:
        self.clean_up()
        if self.disowned:  # nothing of this run stays on a volume that is not the project's
            group_snapshots.leave(self.rt, self.job, self.volume)
        group_snapshots.release(self.rt, self.job)
        return "the partial copy was removed"

    def _remove_older_source_snapshots(self) -> None:
        # Done beside the target snapshot already, unless an earlier attempt committed.
        removal = self.removal or SourceSnapshotRemoval.run(self.rt, self.volume, self.rp)
        removal.report()

    def aftercare(self, outcome: Outcome) -> Aftercare:
        rt, rp, job = self.rt, self.rp, self.job
        steps: Aftercare = [
            ("removing the backup's checkpoint", self.remove_checkpoint),
            ("removing the volume's older cairn.* source snapshots",
             self._remove_older_source_snapshots),
        ]
        if job.group_id is not None:
            steps.append(("removing the run's group snapshot",
                          lambda: group_snapshots.release(rt, job)))
        if job.plan_id is not None:
            plan_id = job.plan_id

            def prune() -> None:
                # Retention follows every backup of a plan (the scheduler admits the prune).
                with rt.db.session() as session:
                    request_prune(session, plan_id, job.project_id, rt.clock(),
                                  max_attempts=rt.settings.job_max_attempts)

            steps.append(("requesting the plan's prune", prune))

            def copy_off_site() -> None:
                with rt.db.session() as session:
                    offsite.copy_after_backup(session, rt.settings, plan_id, rp.id)

            steps.append(("queueing the plan's off-site copy", copy_off_site))
        return steps


def lock_volume(rt: Runtime, job: ClaimedJob, reporter: JobReporter, volume: Volume) -> None:
    """Wait for the volume's lock: a prune of the volume's plan holds it for seconds."""
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while (holder := locks.try_lock(rt.db, volume.id, job.id)) is not None:
        if time.monotonic() > deadline:
            raise VolumeBusy(f"the volume {volume.ref!r} stayed locked by job {holder} for "
                             f"{LOCK_WAIT_SECONDS:.0f} s; try again when it has finished",
                             job_id=holder)
        reporter.check()
        time.sleep(0.2)


def _copy(rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
          volume: Volume, owner: Callable[[], bool | None],
          ) -> tuple[CopyStats, SourceSnapshotRemoval]:
    target = targets.snapshotted(rt.settings, rp.target)
    phases = reporter.phases
    guard = QuotaGuard(rt, rp)
    reporter.quota = guard.progress
    with rt.clusters.ioctx(volume.cluster, volume.pool) as src_io, \
            rt.clusters.ioctx(target.cluster, target.pool) as dst_io, ExitStack() as stack:
        phases.lap("open")
        # The source snapshot waits for the mon's next proposal; meanwhile Cinder says
        # whether the project still owns the volume (its refusal wins over any error of
        # the snapshot, which the undo then removes: no byte is read before both ended),
        # and the target side (the backup image, the base and its manifest) is made
        # ready. (Not the backup image's exclusive lock: taken by hand, librbd would
        # refuse it to a restore point's delete running at the same time.)
        (bootable, side), (source_snapshots, snap_id, source) = side_by_side(
            stack, lambda here: (owner(), backup_image.open_target(rt, job, rp, dst_io, here)),
            lambda there: open_source(rt, job, reporter, src_io, volume, rp, there))
        phases.lap("snapshot")
        size = source.size()
        order = source.stat()["order"]
        fresh = side.backup is None
        if side.backup is None:
            backup_image.create(dst_io, rp, volume, size, order)
            backup = stack.enter_context(rbd_images.open_image(dst_io, rp.backup_image))
        else:
            backup = side.backup
        if backup.size() != size:
            backup.resize(size)  # the volume grew (or shrank) since the last backup
        base, full_reason = backup_image.choose_base(rp, side, source_snapshots)
        phases.lap("open")
        stats, record = _copy_objects(rt, job, reporter, rp, dst_io, source, backup, base,
                                      size, 1 << order, fresh=fresh, snap_id=snap_id,
                                      by_digest=source_snapshots is None, guard=guard)
        phases.lap("plan")  # the diff, then the copy the engine timed itself
        phases.move("plan", "copy", stats.elapsed)
        # What the restore point will count, measured on the head its snapshot freezes.
        measure = RbdHeld(rt, rp.target, rp.volume_id, head_of=rp.id)
        guard.settle(measure)
        start = base.manifest if base else manifest.Manifest(1 << order, size)
        final = start.updated(record, size)
        manifest.store(dst_io, rp.manifest_object, final, volume_id=rp.volume_id)
        phases.lap("manifest")
        reporter.check()
        # The target snapshot and the removal of the older source snapshots each wait for
        # a mon proposal; side by side, the job waits for one.
        _, removal = side_by_side(
            stack, lambda _: rbd_images.ensure_snapshot(backup, rp.snapshot),
            lambda _: SourceSnapshotRemoval.run(rt, volume, rp))
        phases.lap("target_snapshot")
    quota_guard.commit(rt, rp, measure, {
        "size_bytes": size, "bytes_copied": stats.bytes_written,
        "bytes_read": stats.bytes_read,
        "kind": RestorePointKind.INCREMENTAL if base else RestorePointKind.FULL,
        "base_restore_point_id": base.restore_point.id if base else None,
        "full_reason": full_reason,
        "duration_seconds": stats.elapsed, "completed_at": utcnow(),
        "checksum_algorithm": manifest.ALGORITHM,
        "objects_checksummed": len(final.digests), "status_reason": None,
        "source_bootable": bootable})
    phases.lap("commit")
    return stats, removal


def _copy_objects(rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
                  dst_io: rados.Ioctx, source: rbd.Image, backup: rbd.Image, base: Base | None,
                  size: int, object_size: int, *, fresh: bool, snap_id: int,
                  by_digest: bool = False, guard: QuotaGuard | None = None
                  ) -> tuple[CopyStats, Digests]:
    """Make the backup image's head equal the source snapshot: write what the source holds
    and clear what only the head still holds, for every object (a full) or for the objects
    that changed since the base, on the source or on the head (an interrupted attempt may
    have written there). Resumes from the checkpoint of an earlier attempt.

    `by_digest`: the source has no snapshot of the base to diff from (a group snapshot's
    member): every object is read, and one is written only when its digest differs from
    the base's or the head changed there since."""
    only = None
    unchanged = None
    if base is not None:
        since = base.restore_point.snapshot
        head_changed = changed_objects(backup, size, object_size, since)
        if by_digest:
            unchanged = Unchanged(dict(base.manifest.digests), frozenset(
                head_changed | resized_objects(base.manifest.image_size, size, object_size)))
        else:
            only = (changed_objects(source, size, object_size, since) | head_changed
                    | resized_objects(base.manifest.image_size, size, object_size))
    # A fresh image holds nothing; and diffing it would load its object map into this
    # handle before the engine could mark the objects it writes (new_target_pool).
    in_backup = set() if fresh else allocated_objects(backup, size, object_size)
    plan = plan_chunks(size, object_size, allocated_objects(source, size, object_size),
                       in_backup, only=only)
    # The checkpoint is bound to the source snapshot's identity, not only its name: a
    # retry whose snapshot vanished takes a new one of the volume's head under the same
    # name, and resuming the old copy onto it would mix two points in time.
    plan_key = (f"{base.restore_point.id if base else 'full'}:{size}:{object_size}:"
                f"snap{snap_id}")
    # A checkpoint describes data in the backup image: none if the image is new.
    saved = (checkpoint.load(dst_io, rp.checkpoint_object, plan_key)
             if job.attempt > 1 and not fresh else None)
    if saved is not None and any(c.index not in saved.digests for c in plan
                                 if c.index < saved.resume_index):
        log.warning("backup %s: the checkpoint lacks objects it claims done; starting over",
                    rp.id)
        saved = None
    start = saved.resume_index if saved else 0
    chunks = [c for c in plan if c.index >= start]
    resumed = sum(c.length for c in plan if c.index < start and c.in_source)
    if guard is not None and saved is not None:
        # What the earlier attempt wrote, for the quota: the objects it found data in
        # (whole, the quota's unit), not every object it read.
        guard.earlier = sum(c.length for c in plan if c.index < start and c.in_source
                            and saved.digests.get(c.index) is not None)
    if saved:
        log.info("backup %s resumes at object %d (%d bytes already copied)", rp.id, start,
                 resumed)
    record: Digests = dict(saved.digests) if saved else {}
    writer = checkpoint.CheckpointWriter(dst_io, rp.checkpoint_object, plan_key, saved,
                                         volume_id=rp.volume_id)
    reporter.on_persist = lambda stats: writer.save(stats.resume_index, record)
    engine = CopyEngine(window=rt.settings.copy_window, pacer=reporter.pacer,
                        on_progress=reporter.progress)
    reporter.start_copy(resumed + sum(c.length for c in chunks if c.in_source), resumed,
                        engine.window)
    stats = engine.run(source, backup, chunks, record=record, resumed_bytes=resumed,
                       new_target_pool=dst_io if fresh else None, unchanged=unchanged)
    backup.flush()
    return stats, record
