"""The source side of a backup: the volume's `cairn.<rp>` snapshot, taken once for its
restore point (a retry reuses it: the restore point's time is when it was taken) or found
as the volume's member of its run's group snapshot (`open_source`); the removal of the
older ones nobody builds on any more (`SourceSnapshotRemoval`: every snapshot costs the
tenant's VM copy-on-write); and the removal of one restore point's own, when its backup
failed or it is deleted (`remove_source_snapshot`). Both kinds of target read the source
the same way."""

from __future__ import annotations

import logging
import re
import time
from contextlib import ExitStack
from dataclasses import dataclass

import rados
import rbd

from services.errors import NotFound, SnapshotsLeft, StorageError
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.restore_points import repository as restore_points
from services.status import RestorePointStatus
from services.storage import rbd_images
from worker.managers import group_snapshots
from worker.managers.claim import ClaimedJob
from worker.managers.reporter import JobReporter
from worker.runtime import Runtime

log = logging.getLogger(__name__)

SNAPSHOT_WAIT_SECONDS = 60.0

_CAIRN_SNAPSHOT = re.compile(r"^cairn\.[0-9a-f-]{36}$")


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


def remove_source_snapshot(rt: Runtime, volume: Volume, rp: RestorePoint) -> None:
    """Remove `rp`'s own source snapshot, if the volume still has it (a volume, or a pool,
    that is gone took its snapshots with it)."""
    try:
        with rt.clusters.ioctx(volume.cluster, volume.pool) as src_io, \
                rbd_images.open_image(src_io, volume.image) as head:
            rbd_images.remove_snapshot(head, rp.snapshot)
    except NotFound:
        pass
