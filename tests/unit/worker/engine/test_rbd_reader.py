"""A restore point on an RBD target read at random (`worker/engine/rbd_reader.py`): whole
objects of the backup snapshot, each checked with the manifest's digest as restore and
verify check it. A damaged object, a lost one (it reads as zeros) and a manifest of another
shape are DataCorrupt naming what is wrong; objects the manifest records no data for are
zeros and never read; librbd's errors leave as Cairn's. The image is in memory, the
manifest real; the reader over a real backup snapshot is in
tests/integration/worker/test_reader.py."""

from __future__ import annotations

import errno
import random
from functools import partial

import pytest
import rbd

from services.errors import DataCorrupt, StorageError
from services.settings import Settings
from services.storage.ceph import CephClusters
from worker.engine.manifest import Manifest, digest
from worker.engine.rbd_reader import RbdReader

ORDER = 12
OBJECT = 1 << ORDER
SIZE = 9 * OBJECT + 1234
HOLES = {1, 2, 6}


class Snapshot:
    """A backup snapshot in memory: its bytes, and the objects read."""

    def __init__(self, data: bytes, order: int = ORDER) -> None:
        self.data = bytearray(data)
        self.order = order
        self.read_objects: list[int] = []
        self.error: Exception | None = None

    def size(self) -> int:
        return len(self.data)

    def stat(self) -> dict[str, int]:
        return {"order": self.order}

    def read(self, offset: int, length: int, _flags: int = 0) -> bytes:
        if self.error is not None:
            raise self.error
        self.read_objects.append(offset // OBJECT)
        return bytes(self.data[offset:offset + length])


def _backed_up() -> tuple[bytes, Manifest]:
    """An odd-sized volume with holes, and its manifest as a backup writes it."""
    data = bytearray(random.Random(3402).randbytes(SIZE))
    for index in HOLES:
        data[index * OBJECT:(index + 1) * OBJECT] = bytes(OBJECT)
    data[3 * OBJECT:3 * OBJECT + 100] = bytes(100)  # zeros inside an object with data
    digests = {i: digest(bytes(data[i * OBJECT:(i + 1) * OBJECT]))
               for i in range(-(-SIZE // OBJECT)) if i not in HOLES}
    return bytes(data), Manifest(OBJECT, SIZE, digests)


def test_random_ranges_read_as_the_volume_did_and_holes_are_never_read() -> None:
    data, manifest = _backed_up()
    snapshot = Snapshot(data)
    rng = random.Random(3403)
    with RbdReader(snapshot, manifest, cache_bytes=2 * OBJECT) as reader:  # type: ignore[arg-type]
        assert (reader.size, reader.block_size) == (SIZE, OBJECT)
        for _ in range(300):
            offset = rng.randrange(SIZE + 10)
            length = rng.randrange(3 * OBJECT)
            assert reader.read(offset, length) == data[offset:offset + length], (offset, length)
        assert reader.read(0, 2 * SIZE) == data
        assert [(e.offset, e.length) for e in reader.extents()] == [
            (0, OBJECT), (3 * OBJECT, 3 * OBJECT), (7 * OBJECT, SIZE - 7 * OBJECT)]
    assert set(snapshot.read_objects).isdisjoint(HOLES)


def test_a_flipped_byte_fails_the_read_naming_the_object_and_its_offset() -> None:
    data, manifest = _backed_up()
    snapshot = Snapshot(data)
    snapshot.data[4 * OBJECT + 77] ^= 0x01
    with RbdReader(snapshot, manifest) as reader:  # type: ignore[arg-type]
        with pytest.raises(DataCorrupt, match=r"object 4 \(offset 16384\)") as raised:
            reader.read(4 * OBJECT + 2000, 1)  # not even the damaged byte
        assert raised.value.details == {"object_index": 4}
        assert reader.read(5 * OBJECT, OBJECT) == data[5 * OBJECT:6 * OBJECT]


def test_a_lost_object_reads_as_zeros_and_is_refused() -> None:
    data, manifest = _backed_up()
    snapshot = Snapshot(data)
    snapshot.data[8 * OBJECT:9 * OBJECT] = bytes(OBJECT)
    reader = RbdReader(snapshot, manifest, window=4)  # type: ignore[arg-type]
    with reader, pytest.raises(DataCorrupt, match=r"object 8 \(offset 32768\)"):
        reader.read(0, SIZE)


def test_a_manifest_of_another_shape_is_refused_when_the_reader_opens() -> None:
    data, manifest = _backed_up()
    with pytest.raises(DataCorrupt, match="the manifest describes a 38098-byte image"):
        RbdReader(Snapshot(data + b"\0"), manifest)  # type: ignore[arg-type]
    with pytest.raises(DataCorrupt, match="of 4096-byte objects but"):
        RbdReader(Snapshot(data, order=ORDER + 1), manifest)  # type: ignore[arg-type]


def test_a_short_read_is_refused() -> None:
    data, manifest = _backed_up()
    snapshot = Snapshot(data)
    with RbdReader(snapshot, manifest) as reader:  # type: ignore[arg-type]
        snapshot.data = snapshot.data[:SIZE - 5]  # shrunk under the reader
        with pytest.raises(DataCorrupt, match=r"object 9 \(offset 36864\) .* reads 1229 bytes, "
                                              "not 1234"):
            reader.read(SIZE - 1, 1)


def test_librbds_errors_leave_as_cairns() -> None:
    data, manifest = _backed_up()
    snapshot = Snapshot(data)
    clusters = CephClusters(Settings(auth_strategy="noauth", environment="development",
                                     clusters={"ceph-a": {"conf": "/etc/ceph/ceph.conf"}}))
    boundary = partial(clusters.boundary, "ceph-a", "backups", object())
    with RbdReader(snapshot, manifest, boundary=boundary) as reader:  # type: ignore[arg-type]
        snapshot.error = rbd.IOError("EIO on rbd_data.abcd.0000000000000000", errno=errno.EIO)
        with pytest.raises(StorageError, match="the Ceph cluster failed an operation"):
            reader.read(0, 1)
