"""A restore point's checksum manifest: one xxh3-128 digest per non-zero object.

Why xxh3-128: it hashes ~50 GiB per CPU-second where sha256 manages ~1.7 and blake3 ~6, so
checksumming costs the copy almost nothing (a copy costs ~3.3 CPU-s/GiB in all); 128 bits
make an accidental match between a damaged and an intact 4 MiB object negligible. It guards
against corruption and lost writes, not against an attacker with write access to the backup
pool. Objects absent from the manifest read as zeros.

Stored in RADOS beside the backup image, never as rows in SQL (a 10 TB volume has 2.6 M
objects): a head object `cairn.manifest.<rp>` and shards `cairn.manifest.<rp>.<n>` of
SHARD_OBJECTS entries each (256 GiB of volume per shard at 4 MiB objects, at most ~1.5 MB),
so no single RADOS object grows with the volume and a reader loads one shard at a time."""

from __future__ import annotations

import contextlib
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import rados
import xxhash

from services.errors import DataCorrupt
from services.records.restore_points import OWNER_XATTR
from worker.engine.zeros import all_zero

ALGORITHM = "xxh3-128"
SHARD_OBJECTS = 65536
_MAGIC = b"CAIRNMF2"
_HEADER = struct.Struct("<8sIQQII")  # magic, object_size, image_size, entries, shards, per shard
_ENTRY = struct.Struct("<Q16s")


def digest(data: bytes) -> bytes:
    return xxhash.xxh3_128_digest(data)


@dataclass
class Manifest:
    object_size: int
    image_size: int
    digests: dict[int, bytes] = field(default_factory=dict)

    def check(self, index: int, data: bytes | None) -> bytes | None:
        """The digest of object `index` as read (`data`; None where it reads as zeros) if
        it is the one recorded, else DataCorrupt naming the object: the one check of an RBD
        target's data, which restore and verify (the copy engine) and the restore point's
        reader share. An object the manifest records nothing for must read as zeros; bytes
        given for it are scanned for data only then (the engine passes None for a zero
        object it found already, and the reader reads only objects that hold data)."""
        recorded = self.digests.get(index)
        if recorded is None and data is not None and all_zero(data):
            data = None
        value = None if data is None else digest(data)
        if value != recorded:
            raise DataCorrupt(
                f"object {index} (offset {index * self.object_size}) of the restore point "
                "does not match its checksum: the backup copy is damaged",
                object_index=index,
            )
        return value

    def check_shape(self, image_size: int, object_size: int) -> None:
        """Raise DataCorrupt unless the manifest describes an image of this shape."""
        if (self.image_size, self.object_size) != (image_size, object_size):
            raise DataCorrupt(
                f"the manifest describes a {self.image_size}-byte image of "
                f"{self.object_size}-byte objects but the backup snapshot holds {image_size} "
                f"bytes of {object_size}-byte objects")

    def updated(self, changes: dict[int, bytes | None], image_size: int) -> Manifest:
        """The manifest of an image that differs from this one's by `changes` and is now
        `image_size` long (objects past the end are gone)."""
        digests = dict(self.digests)
        for index, value in changes.items():
            if value is None:
                digests.pop(index, None)
            else:
                digests[index] = value
        end = -(-image_size // self.object_size)
        return Manifest(self.object_size, image_size,
                        {i: d for i, d in digests.items() if i < end})

    def shards(self) -> Iterator[tuple[int, bytes]]:
        by_shard: dict[int, list[int]] = {}
        for index in self.digests:
            by_shard.setdefault(index // SHARD_OBJECTS, []).append(index)
        for shard in sorted(by_shard):
            body = b"".join(_ENTRY.pack(i, self.digests[i]) for i in sorted(by_shard[shard]))
            yield shard, zlib.compress(body, level=1)


def _shard_name(name: str, shard: int) -> str:
    return f"{name}.{shard}"


def store(ioctx: rados.Ioctx, name: str, manifest: Manifest, *, volume_id: str = "") -> None:
    """Write the shards, then the head: a head always describes complete shards."""
    shard_count = 0
    for shard, blob in manifest.shards():
        ioctx.write_full(_shard_name(name, shard), blob)
        shard_count = max(shard_count, shard + 1)
    header = _HEADER.pack(_MAGIC, manifest.object_size, manifest.image_size,
                          len(manifest.digests), shard_count, SHARD_OBJECTS)
    ioctx.write_full(name, header)
    if volume_id:
        ioctx.set_xattr(name, OWNER_XATTR, volume_id.encode())


def load(ioctx: rados.Ioctx, name: str) -> Manifest:
    blob = _read(ioctx, name)
    if blob is None:
        raise DataCorrupt(f"the checksum manifest {name!r} is missing from the backup pool")
    try:
        magic, object_size, image_size, count, shard_count, _per = _HEADER.unpack_from(blob)
    except struct.error:
        raise DataCorrupt(f"the checksum manifest {name!r} is truncated") from None
    if magic != _MAGIC:
        raise DataCorrupt(f"the checksum manifest {name!r} has an unknown format")
    if object_size <= 0 or object_size & (object_size - 1):
        raise DataCorrupt(f"the checksum manifest {name!r} is damaged: object size "
                          f"{object_size}")
    objects = -(-image_size // object_size)
    digests: dict[int, bytes] = {}
    for shard in range(shard_count):
        raw = _read(ioctx, _shard_name(name, shard))
        if raw is None:
            continue  # a shard with no non-zero object is never written
        try:
            body = zlib.decompress(raw)
        except zlib.error as exc:
            raise DataCorrupt(f"the checksum manifest {name!r} is damaged: shard {shard} "
                              f"does not decompress ({exc})") from None
        if len(body) % _ENTRY.size:
            raise DataCorrupt(f"the checksum manifest {name!r} is damaged: shard {shard} "
                              "is cut short")
        for offset in range(0, len(body), _ENTRY.size):
            index, value = _ENTRY.unpack_from(body, offset)
            if index >= objects or index // SHARD_OBJECTS != shard:
                raise DataCorrupt(f"the checksum manifest {name!r} is damaged: shard {shard} "
                                  f"names object {index} of a {objects}-object image")
            digests[index] = value
    if len(digests) != count:
        raise DataCorrupt(f"the checksum manifest {name!r} is incomplete: {len(digests)} of "
                          f"{count} entries")
    return Manifest(object_size, image_size, digests)


def remove(ioctx: rados.Ioctx, name: str) -> None:
    blob = _read(ioctx, name)
    shard_count = 0
    if blob is not None and len(blob) >= _HEADER.size:
        shard_count = _HEADER.unpack_from(blob)[4]
    for shard in range(shard_count):
        with contextlib.suppress(rados.ObjectNotFound):
            ioctx.remove_object(_shard_name(name, shard))
    with contextlib.suppress(rados.ObjectNotFound):
        ioctx.remove_object(name)


def _read(ioctx: rados.Ioctx, name: str) -> bytes | None:
    try:
        size, _mtime = ioctx.stat(name)
        data: bytes = ioctx.read(name, length=size)
    except rados.ObjectNotFound:
        return None
    return data
