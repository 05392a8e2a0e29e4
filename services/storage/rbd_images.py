"""The RBD driver boundary: image and snapshot operations, with librbd's errors turned into
Cairn's. Nothing above this module imports `rbd` exceptions."""

from __future__ import annotations

import contextlib
import logging
import re
import struct
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import rados
import rbd

from services.errors import ImageExists, NotFound, StorageError, VolumeNotFound
from services.storage.ceph import CephClusters
from services.storage.refs import ImageRef

log = logging.getLogger(__name__)


def image_exists(clusters: CephClusters, ref: ImageRef) -> bool:
    try:
        with clusters.ioctx(ref.cluster, ref.pool) as ioctx:
            return image_exists_in(ioctx, ref.image)
    except NotFound:  # the pool
        return False


def image_exists_in(ioctx: rados.Ioctx, name: str) -> bool:
    try:
        with rbd.Image(ioctx, name, read_only=True):
            return True
    except rbd.ImageNotFound:
        return False


def require_volume(clusters: CephClusters, ref: ImageRef, *, field: str) -> None:
    clusters.check_known(ref.cluster, field=field)
    if not image_exists(clusters, ref):
        raise VolumeNotFound(
            f"volume {str(ref)!r} not found: no RBD image {ref.image!r} in pool "
            f"{ref.pool!r} on cluster {ref.cluster!r}",
            volume=str(ref),
        )


@contextmanager
def open_image(ioctx: rados.Ioctx, name: str, *, snapshot: str | None = None,
               read_only: bool = False, snapshot_id: int | None = None) -> Iterator[rbd.Image]:
    """`snapshot_id`: a snapshot of any namespace (an RBD group snapshot's member has no
    name to open it by)."""
    try:
        image = rbd.Image(ioctx, name, snapshot=snapshot, read_only=read_only)
        if snapshot_id is not None:
            try:
                image.set_snap_by_id(snapshot_id)
            except BaseException:
                image.close()
                raise
    except rbd.ImageNotFound:
        what = f"{name}@{snapshot or snapshot_id}" if snapshot or snapshot_id else name
        raise NotFound(f"RBD image {what!r} not found in pool {ioctx.get_pool_name()!r}") from None
    try:
        yield image
    finally:
        image.close()


def create_image(ioctx: rados.Ioctx, name: str, size: int, *, order: int | None = None,
                 metadata: dict[str, str] | None = None,
                 replace_remnant: bool = False) -> None:
    """Create an image. `replace_remnant`: when the name is taken by the remnant of a
    create that was interrupted (a worker killed inside `rbd create` leaves the name and id
    but no header: the image can be neither created nor opened), remove it and create
    again. Only for a caller that is the name's only writer, such as a job's retry."""
    try:
        rbd.RBD().create(ioctx, name, size, order=order)
    except rbd.ImageExists:
        if not (replace_remnant and _remove_remnant(ioctx, name)):
            raise ImageExists(
                f"an RBD image {name!r} already exists in pool {ioctx.get_pool_name()!r}"
            ) from None
        log.warning("removed the remnant of an interrupted create of RBD image %s in pool %s",
                    name, ioctx.get_pool_name())
        rbd.RBD().create(ioctx, name, size, order=order)
    if metadata:
        with open_image(ioctx, name) as image:
            for key, value in metadata.items():
                image.metadata_set(key, value)


OBJECT_EXISTS = 1
"""librbd's object-map state of an object that holds data (object_map_types.h)."""


def mark_objects_existing(ioctx: rados.Ioctx, image: rbd.Image,
                          indexes: Iterable[int]) -> bool:
    """Mark the objects about to be written as existing in a fresh image's object map,
    with one class call per run of objects, all in flight at once.

    librbd marks each new object itself before writing it, and the write waits for that
    round trip: under network latency, a copy into a fresh image spends most of its time
    there (a 4 MiB write to a new object took 99 ms through a 20 ms delay line, an
    overwrite 54). The call is the one librbd makes (`object_map_update` of cls_rbd), so
    the map stays in librbd's format; librbd reads it when it takes the image's exclusive
    lock at the first write, or when the handle first diffs the image. So: only for an
    image nobody has written through yet, on a handle that has not diffed it, and every
    marked object must then be written or deallocated (`write_zeroes`), or the map would
    claim data that is not there (reads would still return zeros; diffs would list the
    object). False when the image has no object map or a call failed: librbd then marks
    the remaining objects itself."""
    if not image.features() & rbd.RBD_FEATURE_OBJECT_MAP:
        return False
    oid = f"rbd_object_map.{image.id()}"
    runs: list[tuple[int, int]] = []
    for index in sorted(indexes):
        if runs and runs[-1][1] == index:
            runs[-1] = (runs[-1][0], index + 1)
        else:
            runs.append((index, index + 1))
    # start, end (exclusive), new state, and an absent optional current state.
    calls = [ioctx.aio_execute(oid, "rbd", "object_map_update",
                               struct.pack("<QQBB", start, end, OBJECT_EXISTS, 0), 0)
             for start, end in runs]
    failed = 0
    for call in calls:
        call.wait_for_complete()
        failed += call.get_return_value() < 0
    if failed:
        log.warning("%d of %d object-map updates of image %s failed; librbd marks those "
                    "objects itself", failed, len(calls), image.get_name())
    return not failed


def _remove_remnant(ioctx: rados.Ioctx, name: str) -> bool:
    """Remove what is under `name` if it cannot be opened; False when it is a whole image."""
    return not image_exists_in(ioctx, name) and remove_image(ioctx, name)


def remove_image(ioctx: rados.Ioctx, name: str) -> bool:
    """Remove an image; False when it was not there."""
    try:
        rbd.RBD().remove(ioctx, name)
    except rbd.ImageNotFound:
        return False
    except rbd.ImageBusy:
        raise StorageError(f"RBD image {name!r} is in use and cannot be removed now") from None
    except rbd.ImageHasSnapshots:
        raise StorageError(f"RBD image {name!r} still has snapshots") from None
    return True


def clone_snapshot(parent_io: rados.Ioctx, parent: str, snapshot: str,
                   child_io: rados.Ioctx, child: str) -> None:
    """A copy-on-write clone of parent@snapshot (format 2 on Cairn's connections, so the
    snapshot needs no protection); its writes never reach the parent."""
    try:
        rbd.RBD().clone(parent_io, parent, snapshot, child_io, child)
    except rbd.ImageExists:
        raise ImageExists(f"an RBD image {child!r} already exists in pool "
                          f"{child_io.get_pool_name()!r}") from None
    except rbd.ImageNotFound:
        raise NotFound(f"RBD image {parent}@{snapshot} not found in pool "
                       f"{parent_io.get_pool_name()!r}") from None


def snapshot_children(ioctx: rados.Ioctx, name: str, snapshot: str) -> list[str]:
    """The clones that depend on name@snapshot, as pool/image; [] when there is no such
    snapshot."""
    try:
        with open_image(ioctx, name, snapshot=snapshot, read_only=True) as image:
            return [f"{c['pool']}/{c['image']}" for c in image.list_children2()]
    except NotFound:
        return []


def rename_image(ioctx: rados.Ioctx, name: str, new_name: str) -> None:
    try:
        rbd.RBD().rename(ioctx, name, new_name)
    except rbd.ImageExists:
        raise ImageExists(f"an RBD image {new_name!r} already exists in pool "
                          f"{ioctx.get_pool_name()!r}") from None


def snapshot_names(image: rbd.Image) -> list[str]:
    return [snap["name"] for snap in image.list_snaps()]


def snapshot_ids(image: rbd.Image) -> dict[str, int]:
    """Snapshot name -> snap id: the id tells a snapshot from a later one of the same name."""
    return {snap["name"]: snap["id"] for snap in image.list_snaps()}


def ensure_snapshot(image: rbd.Image, name: str) -> bool:
    """Create the snapshot unless it exists; True when this call created it."""
    if name in snapshot_names(image):
        return False
    try:
        image.create_snap(name)
    except rbd.ImageExists:
        return False
    return True


def remove_snapshot(image: rbd.Image, name: str) -> bool:
    """Remove a snapshot; False when it was not there. A protected snapshot (someone
    cloned it, or protected it by hand) or one in use is a StorageError naming it."""
    try:
        image.remove_snap(name)
    except rbd.ImageNotFound:
        return False
    except (rbd.ImageBusy, rbd.InvalidArgument):
        raise StorageError(f"snapshot {name!r} of RBD image {image.get_name()!r} cannot be "
                           "removed: it is protected (a clone depends on it) or in use"
                           ) from None
    return True


def _changed_extents(image: rbd.Image, since: str | None) -> list[tuple[int, int, bool]]:
    """(offset, length, exists) of every object that differs between snapshot `since`
    (None: an empty image) and the image as opened, from the object maps (fast-diff); a
    clone's parent is not part of it (Cairn's backup images have none)."""
    found: list[tuple[int, int, bool]] = []

    def on_extent(offset: int, length: int, exists: bool) -> int:
        if length > 0:
            found.append((offset, length, exists))
        return 0

    size = image.size()
    if size:
        try:
            image.diff_iterate(0, size, since, on_extent, include_parent=False,
                               whole_object=True)
        except (rbd.ImageNotFound, rbd.ObjectNotFound):
            raise NotFound(f"snapshot {since!r} of RBD image {image.get_name()!r} is gone"
                           ) from None
    return found


def held_beyond(image: rbd.Image, since: str | None) -> int:
    """Bytes of the objects the image (as opened: a snapshot or the head) holds that differ
    from snapshot `since`, counted whole (the object size, less for the last one): with
    `since` the snapshot before it, what `rbd du` says it uses."""
    return sum(length for _, length, exists in _changed_extents(image, since) if exists)


def discard_since(image: rbd.Image, since: str) -> int:
    """Deallocate every object of the head (open, writable) that differs from snapshot
    `since`; returns the bytes it held. The snapshots keep their own versions."""
    freed = 0
    for offset, length, exists in _changed_extents(image, since):
        if exists:
            image.write_zeroes(offset, length)  # a whole object: deallocated
            freed += length
    return freed


def metadata(image: rbd.Image, key: str) -> str | None:
    try:
        value: str = image.metadata_get(key)
    except KeyError:
        return None
    except rbd.ObjectNotFound:
        return None
    return value


def break_locks(image: rbd.Image) -> int:
    """Break the exclusive locks others hold on an image Cairn owns. Used when a job is
    retried: the previous attempt's worker died holding the lock, and librbd would otherwise
    wait for its watch to time out. Breaking blocklists that client, so a worker that was only
    presumed dead can no longer write either (fencing). Never used on a tenant's volume."""
    broken = 0
    for owner in image.lock_get_owners():
        image.lock_break(owner["mode"], owner["owner"])
        broken += 1
    return broken


def image_names(ioctx: rados.Ioctx) -> list[str]:
    names: list[str] = rbd.RBD().list(ioctx)
    return names


def image_size(ioctx: rados.Ioctx, name: str) -> int | None:
    """The image's size in bytes; None when there is no such image (removed since it was
    listed)."""
    try:
        with rbd.Image(ioctx, name, read_only=True) as image:
            size: int = image.size()
            return size
    except rbd.ImageNotFound:
        return None


def snapshot_times(ioctx: rados.Ioctx, name: str) -> tuple[datetime, dict[str, datetime]] | None:
    """When the image was created and when each of its snapshots was taken (UTC); None when
    there is no such image."""
    try:
        with rbd.Image(ioctx, name, read_only=True) as image:
            return (_utc(image.create_timestamp()),
                    {s["name"]: _utc(image.get_snap_timestamp(s["id"]))
                     for s in image.list_snaps()})
    except rbd.ImageNotFound:
        return None


def object_times(ioctx: rados.Ioctx, pattern: re.Pattern[str]) -> dict[str, datetime]:
    """RADOS objects of the pool whose names match, with their modification times (UTC).
    Lists the whole pool: for a periodic reconciler, not for a request path."""
    found: dict[str, datetime] = {}
    for obj in ioctx.list_objects():
        if pattern.match(obj.key):
            try:
                _size, mtime = ioctx.stat(obj.key)
            except rados.ObjectNotFound:
                continue
            found[obj.key] = datetime.fromtimestamp(time.mktime(mtime), UTC)
    return found


def object_xattr(ioctx: rados.Ioctx, name: str, key: str) -> str | None:
    try:
        value: bytes = ioctx.get_xattr(name, key)
    except (rados.ObjectNotFound, rados.NoData):
        return None
    return value.decode(errors="replace")


def remove_object(ioctx: rados.Ioctx, name: str) -> None:
    with contextlib.suppress(rados.ObjectNotFound):
        ioctx.remove_object(name)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
