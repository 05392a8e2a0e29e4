"""Backup of one volume into its target pool: snapshot the source, copy what the snapshot
holds (a full) or what changed since the previous restore point's snapshot (an incremental)
onto the volume's backup image, checksum it, snapshot the backup image. The restore point
becomes `available` only after all of that; a failure or cancel removes what the attempt
made, and a retry after a crash resumes from the checkpoint."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass

import rados
import rbd
from sqlalchemy import select

from services.base import utcnow
from services.errors import (
    DataCorrupt,
    NotFound,
    SnapshotsLeft,
    StorageError,
    VolumeBusy,
    VolumeNotFound,
    VolumeNotOwned,
)
from services.plans import offsite
from services.plans.prunes import request_prune
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.restore_points import repository as restore_points
from services.status import (
    RestorePointKind,
    RestorePointStatus,
)
from services.storage import rbd_images
from services.targets import rbd_pool
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
from worker.managers import group_snapshots, quota_guard
from worker.managers.claim import ClaimedJob
from worker.managers.drive import Aftercare, Outcome
from worker.managers.measure_rbd import RbdHeld
from worker.managers.quota_guard import QuotaGuard
from worker.managers.reporter import JobReporter
from worker.managers.restore_point_steps import RestorePointSteps
from worker.managers.side_by_side import side_by_side
from worker.runtime import Runtime

log = logging.getLogger(__name__)

LOCK_WAIT_SECONDS = 120.0

_CAIRN_SNAPSHOT = re.compile(r"^cairn\.[0-9a-f-]{36}$")


@dataclass(frozen=True)
class Base:
    """The restore point an incremental builds on, and its manifest."""

    restore_point: RestorePoint
    manifest: manifest.Manifest


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
        _clean_up(self.rt, self.rp, self.volume)

    def remove_checkpoint(self) -> None:
        _remove_checkpoint(self.rt, self.rp)

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


@dataclass
class _TargetSide:
    """The backup image (None when it does not exist yet: it is made once the source's
    size is known) and the base an incremental would build on, found while the source
    snapshot is being taken."""

    backup: rbd.Image | None
    previous: RestorePoint | None
    base: Base | None
    full_reason: str | None


def _copy(rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
          volume: Volume, owner: Callable[[], bool | None],
          ) -> tuple[CopyStats, SourceSnapshotRemoval]:
    target = rbd_pool.named(rt.settings, rp.target)
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
            stack, lambda here: (owner(), _open_target(rt, job, rp, dst_io, here)),
            lambda there: open_source(rt, job, reporter, src_io, volume, rp, there))
        phases.lap("snapshot")
        size = source.size()
        order = source.stat()["order"]
        fresh = side.backup is None
        if side.backup is None:
            _create_backup_image(dst_io, rp, volume, size, order)
            backup = stack.enter_context(rbd_images.open_image(dst_io, rp.backup_image))
        else:
            backup = side.backup
        if backup.size() != size:
            backup.resize(size)  # the volume grew (or shrank) since the last backup
        base, full_reason = _choose_base(rp, side, source_snapshots)
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


def open_source(rt: Runtime, job: ClaimedJob, reporter: JobReporter, src_io: rados.Ioctx,
                 volume: Volume, rp: RestorePoint,
                 stack: ExitStack) -> tuple[dict[str, int] | None, int, rbd.Image]:
    """The source at the restore point's instant, open for reading: (the volume's
    snapshots by name, or None for a group member; the snap id; the image)."""
    if job.group_id is None:
        # A retry reuses the snapshot of the first attempt: the restore point's time is
        # when that snapshot was taken.
        names, source = _take_source_snapshot(stack, src_io, volume, rp.snapshot)
        return names, names[rp.snapshot], source
    # The run's instant: the volume's member of the group snapshot, which has no name of
    # its own to diff from (hence `unchanged` in the copy).
    snap_id = group_snapshots.member_snapshot(rt, job, reporter, volume)
    source = stack.enter_context(rbd_images.open_image(src_io, volume.image, read_only=True,
                                                       snapshot_id=snap_id))
    return None, snap_id, source


def _open_target(rt: Runtime, job: ClaimedJob, rp: RestorePoint, dst_io: rados.Ioctx,
                 stack: ExitStack) -> _TargetSide:
    if job.attempt > 1:
        _remove_unfinished_snapshot(dst_io, rp)
    backup: rbd.Image | None = None
    # This job is the image's only writer (the active-backup index). A missing image (or
    # the remnant of a killed create, which cannot be opened) is made once the source's
    # size is known.
    with contextlib.suppress(NotFound):
        backup = stack.enter_context(rbd_images.open_image(dst_io, rp.backup_image))
    if rp.kind == RestorePointKind.FULL:
        return _TargetSide(backup, None, None, None)
    with rt.db.session() as session:
        previous = restore_points.newest_available(session, rp.volume_id, rp.target, rp)
        session.expunge_all()
    if previous is None:
        return _TargetSide(backup, None, None, (
            f"no earlier available restore point of this volume on target {rp.target!r}: "
            "the first backup there is a full copy"))
    what = f"the previous restore point {previous.id}"
    if backup is None or previous.snapshot not in rbd_images.snapshot_names(backup):
        return _TargetSide(backup, previous, None, (
            f"the backup snapshot of {what} is missing from the backup image: made a full "
            "copy"))
    try:
        base_manifest = manifest.load(dst_io, previous.manifest_object)
    except DataCorrupt as exc:
        return _TargetSide(backup, previous, None, (
            f"the checksum manifest of {what} is unusable ({exc.message}): made a full copy"))
    return _TargetSide(backup, previous, Base(previous, base_manifest), None)


def _remove_checkpoint(rt: Runtime, rp: RestorePoint) -> None:
    target = rbd_pool.named(rt.settings, rp.target)
    with rt.clusters.ioctx(target.cluster, target.pool) as dst_io:
        checkpoint.remove(dst_io, rp.checkpoint_object)


SNAPSHOT_WAIT_SECONDS = 60.0


def _take_source_snapshot(stack: ExitStack, src_io: rados.Ioctx, volume: Volume,
                          name: str) -> tuple[dict[str, int], rbd.Image]:
    """Snapshot the volume (unless an earlier attempt did); return its snapshots (name ->
    snap id) and the snapshot, open for reading on `stack`.

    A worker killed inside `create_snap` can leave the snapshot half made: listed, but
    never openable (its object map was not written; reproduced by killing a client during
    create_snap on the local stack, and it stays so). It is this restore point's own (its
    name carries the restore point's id) and nothing read from it was kept (the checkpoint
    is bound to the snap id), so it is removed and taken anew. Creating or removing a
    snapshot needs the image's exclusive lock, which a dead owner holds for up to ~30 s:
    hence the retries until SNAPSHOT_WAIT_SECONDS."""
    deadline = time.monotonic() + SNAPSHOT_WAIT_SECONDS
    while True:
        try:
            with rbd_images.open_image(src_io, volume.image) as head:
                rbd_images.ensure_snapshot(head, name)
                names = rbd_images.snapshot_ids(head)
            return names, stack.enter_context(
                rbd_images.open_image(src_io, volume.image, snapshot=name, read_only=True))
        except NotFound:
            if not rbd_images.image_exists_in(src_io, volume.image):
                raise NotFound(f"the volume {volume.ref!r} no longer exists") from None
            if time.monotonic() > deadline:
                raise
            log.warning("snapshot %s of %s is listed but cannot be opened (an attempt was "
                        "killed while taking it); taking it anew", name, volume.ref)
            try:
                with rbd_images.open_image(src_io, volume.image) as head:
                    rbd_images.remove_snapshot(head, name)
            except (NotFound, StorageError) as exc:
                log.warning("removing the half-made snapshot %s of %s: %s; trying again",
                            name, volume.ref, exc)
                time.sleep(1.0)


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


def _choose_base(rp: RestorePoint, side: _TargetSide,
                 source_snapshots: dict[str, int] | None) -> tuple[Base | None, str | None]:
    """The base of an incremental, or None and why the backup is a full copy. Without
    `source_snapshots` (a group member: changes are found by digest) the base's source
    snapshot is not needed."""
    previous = side.previous
    if (previous is not None and source_snapshots is not None
            and previous.snapshot not in source_snapshots):
        return None, (f"the source snapshot {previous.snapshot} of the previous restore "
                      f"point {previous.id} is gone from the volume (removed outside "
                      "Cairn?), so changes since it cannot be computed: made a full copy")
    return side.base, side.full_reason


def _create_backup_image(dst_io: rados.Ioctx, rp: RestorePoint, volume: Volume, size: int,
                         order: int) -> None:
    # This job is the image's only writer (the active-backup index): what cannot be opened
    # under its name is what a killed attempt's create left.
    rbd_images.create_image(dst_io, rp.backup_image, size, order=order,
                            metadata={"cairn.volume_id": volume.id, "cairn.volume": volume.ref,
                                      "cairn.project_id": volume.project_id},
                            replace_remnant=True)


def _remove_unfinished_snapshot(dst_io: rados.Ioctx, rp: RestorePoint) -> None:
    """An interrupted attempt may have left the backup snapshot or manifest of this restore
    point (it never became available, so they are not trusted), and the lock of its dead
    worker on the backup image (the active-backup index makes this job the image's only
    writer). Its checkpoint stays: the retry resumes from it."""
    try:
        with rbd_images.open_image(dst_io, rp.backup_image) as backup:
            rbd_images.break_locks(backup)
            rbd_images.remove_snapshot(backup, rp.snapshot)
    except NotFound:
        pass
    manifest.remove(dst_io, rp.manifest_object)


@dataclass
class SourceSnapshotRemoval:
    """What removing the volume's older source snapshots left, for the job's warnings: a
    failed removal never fails the backup."""

    left: list[str]
    error: Exception | None = None

    @classmethod
    def run(cls, rt: Runtime, volume: Volume, rp: RestorePoint) -> SourceSnapshotRemoval:
        try:
            return cls(_remove_unneeded_source_snapshots(rt, volume, rp))
        except Exception as exc:
            return cls([], exc)

    def report(self) -> None:
        if self.error is not None:
            raise self.error
        if self.left:
            raise SnapshotsLeft("; ".join(self.left))


def _remove_unneeded_source_snapshots(rt: Runtime, volume: Volume,
                                      rp: RestorePoint) -> list[str]:
    """Every source snapshot costs the tenant's VM copy-on-write: keep only the one the next
    incremental to each target builds on, counting `rp` as its target's (it is, or is about
    to be: this runs beside the backup's last step, and a backup that fails after it only
    makes the next one to that target a full copy). Only snapshots whose restore point rows
    belong to this volume row are removed; a `cairn.*` snapshot of another row (another
    project's volume row on the same image), or of no row at all, is left and reported."""
    with rt.db.session() as session:
        needed = {p.snapshot for p in restore_points.incremental_bases(session, volume.id)
                  if p.target != rp.target}
        needed.add(rp.snapshot)
        with rt.clusters.ioctx(volume.cluster, volume.pool) as src_io, \
                rbd_images.open_image(src_io, volume.image) as head:
            names = [n for n in rbd_images.snapshot_names(head)
                     if _CAIRN_SNAPSHOT.match(n) and n not in needed]
            owners = restore_points.owners_of(session, [n.removeprefix("cairn.")
                                                        for n in names])
            left = []
            for name in names:
                owner = owners.get(name.removeprefix("cairn."))
                if owner is None:
                    left.append(f"{name} belongs to no restore point of Cairn; left alone")
                elif owner.volume_id != volume.id:
                    left.append(f"{name} belongs to restore point {owner.id} of another "
                                "volume record; left alone")
                elif owner.status in (RestorePointStatus.CREATING,
                                      RestorePointStatus.DELETING):
                    continue  # its own job owns it now
                else:
                    rbd_images.remove_snapshot(head, name)
    return left


def discard_head(backup: rbd.Image) -> int:
    """Deallocate what the backup image's head holds beyond its newest snapshot (a failed
    or cancelled attempt's writes, or a deleted newest restore point's data): no restore
    point holds it, and the next backup rewrites every object where the head differs from
    its base. Only while no backup writes the head. Returns the bytes freed."""
    snaps = sorted(backup.list_snaps(), key=lambda s: int(s["id"]), reverse=True)
    for snap in snaps:
        try:
            return rbd_images.discard_since(backup, str(snap["name"]))
        except NotFound:
            continue  # deleted meanwhile: the next newest
    return 0


def release_head(rt: Runtime, rp: RestorePoint, volume: Volume, job_id: str, *,
                 locked: bool) -> None:
    """After `rp` was deleted: deallocate what the head of its backup image still holds
    of it when it was the newest (the head keeps a restore point's data until the next
    backup overwrites it), unless a backup of the volume to that target is under way (it
    rewrites the head, and a retry resumes from what the head holds). Under the volume's
    lock (`locked`: the caller, a prune, holds it), which every backup takes before it
    writes."""
    if not locked:
        holder = locks.try_lock(rt.db, volume.id, job_id)
        if holder is not None:
            log.info("volume %s is locked by job %s: its backup image's head is left to it",
                     volume.id, holder)
            return
    try:
        with rt.db.session() as session:
            busy = session.scalar(select(RestorePoint.id).where(
                RestorePoint.volume_id == rp.volume_id, RestorePoint.target == rp.target,
                RestorePoint.status == RestorePointStatus.CREATING).limit(1))
        if busy is not None:
            return
        target = rbd_pool.named(rt.settings, rp.target)
        with rt.clusters.ioctx(target.cluster, target.pool) as dst_io:
            try:
                with rbd_images.open_image(dst_io, rp.backup_image) as backup:
                    freed = discard_head(backup)
            except NotFound:
                return  # the image went with its last restore point
        if freed:
            log.info("freed %d bytes the head of %s held beyond its newest restore point",
                     freed, rp.backup_image)
    finally:
        if not locked:
            locks.unlock(rt.db, volume.id, job_id)


def _clean_up(rt: Runtime, rp: RestorePoint, volume: Volume) -> None:
    """Remove what a failed or cancelled backup made: its snapshots, manifest and checkpoint,
    and the backup image when it holds no restore point. Only ever called before the
    restore point is available (the lifecycle's rule); whatever it cannot remove carries
    the restore point's id in its name, for the orphan reconciler."""
    target = rbd_pool.named(rt.settings, rp.target)
    with rt.clusters.ioctx(target.cluster, target.pool) as dst_io:
        _remove_unfinished_snapshot(dst_io, rp)
        checkpoint.remove(dst_io, rp.checkpoint_object)
        try:
            with rbd_images.open_image(dst_io, rp.backup_image) as backup:
                empty = not rbd_images.snapshot_names(backup)
                if not empty:
                    # What this attempt wrote on the head, beside the restore points'
                    # snapshots: no restore point holds it (the next backup repairs the
                    # head from the source wherever it differs from its base).
                    discard_head(backup)
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
