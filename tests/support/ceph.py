"""Test helpers on the real micro Ceph cluster: make images with known content, read them
back, measure their allocation."""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import rados
import rbd

from worker.engine.extents import allocated_objects

MiB = 1 << 20
STATE = Path(os.environ.get("CAIRN_STATE_DIR", Path(__file__).resolve().parents[2] / ".state"))


OP_TIMEOUT_SECONDS = 60
"""A Rados or RBD call of a test that takes longer fails (ETIMEDOUT) instead of waiting for
ever: a full or stalled cluster then fails the test in a minute rather than blocking the
run inside librados, where pytest-timeout's signal cannot reach it. Far above what any
test's operation takes on a healthy micro cluster."""
TIMEOUTS = {"rados_osd_op_timeout": str(OP_TIMEOUT_SECONDS),
            "rados_mon_op_timeout": str(OP_TIMEOUT_SECONDS),
            "client_mount_timeout": "10"}


def conf_path(cluster: str) -> Path:
    return STATE / cluster / "ceph.conf"


def client(cluster: str, **conf: str) -> rados.Rados:
    """A client of the test's own, not yet connected, with the deadlines above (and
    `conf`)."""
    return rados.Rados(conffile=str(conf_path(cluster)), conf={**TIMEOUTS, **conf})


def connect(cluster: str, **conf: str) -> rados.Rados:
    """A connected `client`."""
    handle = client(cluster, **conf)
    try:
        handle.connect(timeout=10)
    except BaseException:
        handle.shutdown()
        raise
    return handle


@contextmanager
def ioctx(cluster: str, pool: str) -> Iterator[rados.Ioctx]:
    handle = connect(cluster)
    try:
        io = handle.open_ioctx(pool)
        try:
            yield io
        finally:
            io.close()
    finally:
        handle.shutdown()


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def sha256_of(io: rados.Ioctx, name: str, snapshot: str | None = None) -> str:
    digest = hashlib.sha256()
    with rbd.Image(io, name, snapshot=snapshot, read_only=True) as image:
        size = image.size()
        for offset in range(0, size, 4 * MiB):
            digest.update(image.read(offset, min(4 * MiB, size - offset)))
    return digest.hexdigest()


def allocated_bytes(io: rados.Ioctx, name: str, snapshot: str | None = None) -> int:
    total = 0

    def on_extent(_offset: int, length: int, exists: bool) -> int:
        nonlocal total
        if exists:
            total += length
        return 0

    with rbd.Image(io, name, snapshot=snapshot, read_only=True) as image:
        image.diff_iterate(0, image.size(), None, on_extent, include_parent=True)
    return total


def mapped_objects(io: rados.Ioctx, name: str, snapshot: str | None = None) -> int:
    """Objects the image's object map says hold data (the fast path every diff takes)."""
    with rbd.Image(io, name, snapshot=snapshot, read_only=True) as image:
        return len(allocated_objects(image, image.size(), 1 << image.stat()["order"]))


def snapshots(io: rados.Ioctx, name: str) -> list[str]:
    with rbd.Image(io, name, read_only=True) as image:
        return [s["name"] for s in image.list_snaps()]


def image_names(io: rados.Ioctx) -> list[str]:
    return list(rbd.RBD().list(io))


def remove_image(io: rados.Ioctx, name: str, *, wait: float = 60) -> None:
    """Remove an image and its snapshots. A worker killed while it had the image open
    leaves a watch that the OSDs drop only after the watch timeout (~30 s): until then
    librbd refuses the removal as busy, so wait for that rather than leak the image."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with rbd.Image(io, name) as image:
                for snap in image.list_snaps():
                    image.remove_snap(snap["name"])
            rbd.RBD().remove(io, name)
            return
        except rbd.ImageNotFound:
            return
        except (rbd.ImageBusy, rbd.ImageHasSnapshots):  # or a backup just made one
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def remove_backups_of_project(io: rados.Ioctx, project_id: str) -> None:
    """Remove the backup images (with their snapshots, manifests and checkpoints) that
    Cairn made for a test's project in a backup pool: a test that leaves restore points
    behind would leave them to every later session's orphan scan."""
    for name in rbd.RBD().list(io):
        if not name.startswith("cairn.vol."):
            continue
        try:
            with rbd.Image(io, name, read_only=True) as image:
                if image.metadata_get("cairn.project_id") != project_id:
                    continue
                points = [s["name"].removeprefix("cairn.") for s in image.list_snaps()]
        except (rbd.ImageNotFound, KeyError):
            continue
        remove_image(io, name)
        for rp_id in points:
            for obj in (f"cairn.manifest.{rp_id}", f"cairn.checkpoint.{rp_id}",
                        *(f"cairn.manifest.{rp_id}.{n}" for n in range(4))):
                with contextlib.suppress(rados.ObjectNotFound):
                    io.remove_object(obj)


@contextmanager
def dense_image(io: rados.Ioctx, prefix: str, size: int, *, seed: int) -> Iterator[str]:
    """A fully written image of random data (for jobs that must take a while); removed
    afterwards."""
    name = unique_name(prefix)
    rbd.RBD().create(io, name, size)
    with rbd.Image(io, name) as image:
        image.write(_Random(seed).bytes(size), 0)
    try:
        yield name
    finally:
        remove_image(io, name)


def random_image(io: rados.Ioctx, prefix: str, size: int, *, seed: int) -> str:
    """A new image of `size` random bytes; the caller removes it (the `images` fixture)."""
    name = unique_name(prefix)
    rbd.RBD().create(io, name, size)
    with rbd.Image(io, name) as image:
        image.write(_Random(seed).bytes(size), 0)
    return name


def write_file(io: rados.Ioctx, name: str, source: Path) -> None:
    """`source`'s bytes (a filesystem or disk image a tool made) over the image from its
    start, each MiB of zeros as a hole (discarded), as a guest writes."""
    with rbd.Image(io, name) as image, source.open("rb") as data:
        offset = 0
        while piece := data.read(MiB):
            if piece.count(0) == len(piece):
                image.discard(offset, len(piece))
            else:
                image.write(piece, offset)
            offset += len(piece)


def omit_from_snapshot_map(io: rados.Ioctx, image_name: str, snapshot: str,
                           index: int) -> None:
    """Make a snapshot's object map say object `index` holds nothing, as a damaged map or a
    lost object would: librbd then lists no data there and reads it as zeros."""
    with rbd.Image(io, image_name, read_only=True) as image:
        oid = f"rbd_object_map.{image.id()}.{image.snap_get_id(snapshot):016x}"
    call = io.aio_execute(oid, "rbd", "object_map_update",
                          struct.pack("<QQBB", index, index + 1, 0, 0), 0)
    call.wait_for_complete()
    assert call.get_return_value() >= 0


def make_mixed_image(io: rados.Ioctx, name: str, *, size: int = 64 * MiB,
                     seed: int = 1) -> None:
    """An image with random data, all-zero regions written explicitly inside data objects,
    never-written holes (whole objects and a partial tail object's end), and data in the
    last, partial object. Sizes are not object multiples on purpose."""
    rbd.RBD().create(io, name, size)
    with rbd.Image(io, name) as image:
        write_mixed(image, size=size, seed=seed)


def write_mixed(image: rbd.Image, *, size: int, seed: int = 1) -> None:
    """make_mixed_image's pattern, into an existing (e.g. a Cinder volume's) image."""
    rng = _Random(seed)
    image.write(rng.bytes(6 * MiB), 0)                  # objects 0-1 (part)
    image.write(bytes(1 * MiB), 2 * MiB)                # zeros inside data
    image.write(rng.bytes(3 * MiB + 4096), 9 * MiB)      # objects 2-3, unaligned end
    image.write(bytes(512 * 1024), 10 * MiB)            # zeros over data
    # objects between 3 and the small write stay unwritten: a hole
    image.write(rng.bytes(100_000), size * 5 // 8 + 12_345)  # small unaligned write
    image.write(rng.bytes(2 * MiB), size - 2 * MiB - 777)  # into the last object


class _Random:
    def __init__(self, seed: int) -> None:
        self._state = hashlib.sha256(str(seed).encode()).digest()

    def bytes(self, n: int) -> bytes:
        # Deterministic and fast enough for tens of MiB: expand with SHAKE.
        self._state = hashlib.sha256(self._state).digest()
        return hashlib.shake_256(self._state).digest(n)
