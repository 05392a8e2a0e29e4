"""The target side of a backup to an RBD pool: the volume's backup image. Opened, with the
base an incremental builds on, while the source snapshot is being taken (`open_target`,
`choose_base`), or made once the source's size is known (`create`); cleaned up
after a failed attempt (`clean_up`). Its head, what it holds beyond its newest snapshot,
belongs to no restore point (a failed or cancelled attempt's writes, or the data of a
deleted newest restore point, which the head keeps until the next backup overwrites it): a
failed backup's undo and a delete's aftercare free it (`discard_head`, `release_head`), and
the next backup rewrites every object where the head differs from its base either way."""

from __future__ import annotations

import contextlib
import logging
from contextlib import ExitStack
from dataclasses import dataclass

import rados
import rbd
from sqlalchemy import select

from services import targets
from services.errors import DataCorrupt, NotFound
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.restore_points import repository as restore_points
from services.status import RestorePointKind, RestorePointStatus
from services.storage import rbd_images
from services.volumes import locks
from worker.engine import checkpoint, manifest
from worker.managers.claim import ClaimedJob
from worker.runtime import Runtime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Base:
    """The restore point an incremental builds on, and its manifest."""

    restore_point: RestorePoint
    manifest: manifest.Manifest


@dataclass
class TargetSide:
    """The backup image (None when it does not exist yet: it is made once the source's
    size is known) and the base an incremental would build on, found while the source
    snapshot is being taken."""

    backup: rbd.Image | None
    previous: RestorePoint | None
    base: Base | None
    full_reason: str | None


def open_target(rt: Runtime, job: ClaimedJob, rp: RestorePoint, dst_io: rados.Ioctx,
                stack: ExitStack) -> TargetSide:
    """The volume's backup image, open on `stack` if it exists, and the base an incremental
    would build on (or why there is none); a retry first removes what its interrupted
    attempt left of this restore point."""
    if job.attempt > 1:
        _remove_unfinished_snapshot(dst_io, rp)
    backup: rbd.Image | None = None
    # This job is the image's only writer (the active-backup index). A missing image (or
    # the remnant of a killed create, which cannot be opened) is made once the source's
    # size is known.
    with contextlib.suppress(NotFound):
        backup = stack.enter_context(rbd_images.open_image(dst_io, rp.backup_image))
    if rp.kind == RestorePointKind.FULL:
        return TargetSide(backup, None, None, None)
    with rt.db.session() as session:
        previous = restore_points.newest_available(session, rp.volume_id, rp.target, rp)
        session.expunge_all()
    if previous is None:
        return TargetSide(backup, None, None, (
            f"no earlier available restore point of this volume on target {rp.target!r}: "
            "the first backup there is a full copy"))
    what = f"the previous restore point {previous.id}"
    if backup is None or previous.snapshot not in rbd_images.snapshot_names(backup):
        return TargetSide(backup, previous, None, (
            f"the backup snapshot of {what} is missing from the backup image: made a full "
            "copy"))
    try:
        base_manifest = manifest.load(dst_io, previous.manifest_object)
    except DataCorrupt as exc:
        return TargetSide(backup, previous, None, (
            f"the checksum manifest of {what} is unusable ({exc.message}): made a full copy"))
    return TargetSide(backup, previous, Base(previous, base_manifest), None)


def choose_base(rp: RestorePoint, side: TargetSide,
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


def create(dst_io: rados.Ioctx, rp: RestorePoint, volume: Volume, size: int,
           order: int) -> None:
    # This job is the image's only writer (the active-backup index): what cannot be opened
    # under its name is what a killed attempt's create left.
    rbd_images.create_image(dst_io, rp.backup_image, size, order=order,
                            metadata={"cairn.volume_id": volume.id, "cairn.volume": volume.ref,
                                      "cairn.project_id": volume.project_id},
                            replace_remnant=True)


def remove_checkpoint(rt: Runtime, rp: RestorePoint) -> None:
    target = targets.snapshotted(rt.settings, rp.target)
    with rt.clusters.ioctx(target.cluster, target.pool) as dst_io:
        checkpoint.remove(dst_io, rp.checkpoint_object)


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


def clean_up(rt: Runtime, rp: RestorePoint) -> None:
    """Remove what a failed or cancelled backup made in the pool: its backup snapshot,
    manifest and checkpoint, what it wrote on the head, and the backup image when it holds
    no restore point. Only ever called before the restore point is available (the
    lifecycle's rule); whatever it cannot remove carries the restore point's id in its
    name, for the orphan reconciler."""
    target = targets.snapshotted(rt.settings, rp.target)
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
        target = targets.snapshotted(rt.settings, rp.target)
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
