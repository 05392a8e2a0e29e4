"""An object-storage target opened with its keys: sealed chunks and manifests in a bucket.

Layout under the target's prefix: `services/storage/object_layout.py`.

Every manifest is complete on its own (an incremental lists the chunks it shares with its
base as well as the new ones), so deleting any restore point of a chain never breaks
another: a chunk is garbage only when no manifest names it."""

from __future__ import annotations

import hmac
import math
import struct
from dataclasses import dataclass, field

from services.errors import DataCorrupt, TargetKeyChanged, TargetKeyUnavailable
from services.storage import data_keys
from services.storage.object_keys import TargetKeys, unwrap_data_key
from services.storage.object_layout import chunk_key, manifest_key
from services.storage.s3 import Bucket
from worker.engine.chunks import SEALING_OVERHEAD, ChunkCodec, Sealed

_MANIFEST_MAGIC = b"CAIRNOM1"
_MANIFEST_HEADER = struct.Struct("<8sIQQ")  # magic, chunk size, image size, entries
_ENTRY = struct.Struct("<Q32s")  # chunk index, name (keyed BLAKE3)
SMALLEST_CHUNK = 1 << 20
"""The smallest chunk size a target may have (`ObjectTargetSettings.chunk_size_mib`): what
bounds the entries of a manifest of a given image size, whatever the target's size was."""


def manifest_limit(image_size: int) -> int:
    """The most bytes the stored manifest of an image of `image_size` bytes can hold: one
    entry per chunk at the smallest chunk size, sealed (never grown by compression)."""
    entries = math.ceil(image_size / SMALLEST_CHUNK)
    return SEALING_OVERHEAD + _MANIFEST_HEADER.size + entries * _ENTRY.size


@dataclass
class ObjectManifest:
    """The chunks of one restore point: chunk index -> chunk name; an index not listed reads
    as zeros (a hole, or data that was all zeros)."""

    chunk_size: int
    image_size: int
    chunks: dict[int, str] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        parts = [_MANIFEST_HEADER.pack(_MANIFEST_MAGIC, self.chunk_size, self.image_size,
                                       len(self.chunks))]
        parts += [_ENTRY.pack(index, bytes.fromhex(self.chunks[index]))
                  for index in sorted(self.chunks)]
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes, what: str) -> ObjectManifest:
        if len(data) < _MANIFEST_HEADER.size:
            raise DataCorrupt(f"{what} is truncated")
        magic, chunk_size, image_size, entries = _MANIFEST_HEADER.unpack_from(data)
        if magic != _MANIFEST_MAGIC or len(data) != _MANIFEST_HEADER.size + entries * _ENTRY.size:
            raise DataCorrupt(f"{what} is not a Cairn object manifest of {entries} entries")
        chunks = {index: name.hex() for index, name in (
            _ENTRY.unpack_from(data, _MANIFEST_HEADER.size + n * _ENTRY.size)
            for n in range(entries))}
        return cls(chunk_size, image_size, chunks)

    def names(self) -> set[str]:
        return set(self.chunks.values())


class ChunkStore:
    """One target's bucket with its keys. Thread-safe except for `codec()`: each thread
    seals and opens with a codec of its own."""

    def __init__(self, bucket: Bucket, target: str, operator_key: bytes, wrapped: bytes) -> None:
        self.bucket = bucket
        self.target = target
        self._operator_key = operator_key
        self._wrapped = wrapped
        self.keys = TargetKeys.from_data_key(target, unwrap_data_key(operator_key, target,
                                                                     wrapped))

    @classmethod
    def open(cls, bucket: Bucket, target: str, operator_key: bytes | None, *,
             create: bool = False) -> ChunkStore:
        """The store with the data key stored now, unwrapped. A target without one gets its
        key when `create` (its first backup), made exactly once whoever else makes it at
        the same moment; refused beside chunks or manifests (TargetKeyMissing), and without
        `create` (TargetNeverWritten). See `services/storage/data_keys.py`."""
        if operator_key is None:
            raise TargetKeyUnavailable(
                f"target {target!r} is encrypted and no operator key is configured: "
                "nothing on it can be read or written")
        return cls(bucket, target, operator_key,
                   data_keys.stored_or_made(bucket, target, operator_key, create=create))

    def check_key(self) -> None:
        """Raises TargetKeyChanged unless the data key stored now is the one this store
        seals with: asked just before what it sealed is made available. (The same key
        wrapped again, as by a rotation of the operator's key, is the same key.)"""
        stored = data_keys.read(self.bucket, self.target)
        if stored is None:
            raise TargetKeyChanged(
                f"the data key of target {self.target!r} was removed while this job ran: "
                "what it wrote cannot be read back, so it is not kept. Put the key back "
                "(docs/operations.md) and run the job again", target=self.target)
        if stored == self._wrapped:
            return
        keys = TargetKeys.from_data_key(self.target, unwrap_data_key(
            self._operator_key, self.target, stored))
        if not hmac.compare_digest(keys.encryption, self.keys.encryption):
            raise TargetKeyChanged(
                f"the data key of target {self.target!r} is not the one this job sealed "
                "with (it was replaced while the job ran): what it wrote could not be read "
                "back, so it is not kept. Run the job again", target=self.target)

    def codec(self) -> ChunkCodec:
        return ChunkCodec(self.keys)

    def has_chunk(self, project_id: str, name: str) -> bool:
        return self.bucket.size(chunk_key(project_id, name)) is not None

    def put_chunk(self, project_id: str, sealed: Sealed) -> None:
        self.bucket.put(chunk_key(project_id, sealed.name), sealed.blob)

    def get_chunk(self, codec: ChunkCodec, project_id: str, name: str, offset: int,
                  length: int) -> bytes:
        """The chunk's plaintext of `length` bytes (what the manifest says the chunk at
        `offset` holds), checked; DataCorrupt naming the volume offset otherwise. Nothing
        longer than such a chunk sealed is read."""
        try:
            blob = self.bucket.get(chunk_key(project_id, name), limit=length + SEALING_OVERHEAD)
            data = None if blob is None else codec.open_chunk(project_id, name, blob)
        except DataCorrupt as exc:
            raise DataCorrupt(f"the chunk at offset {offset} is corrupt: {exc.message}") from None
        if data is None:
            raise DataCorrupt(f"the chunk at offset {offset} ({name}) is missing from the "
                              "object store")
        if len(data) != length:
            raise DataCorrupt(f"the chunk at offset {offset} holds {len(data)} bytes, not "
                              f"{length}")
        return data

    def write_manifest(self, project_id: str, restore_point_id: str,
                       manifest: ObjectManifest) -> None:
        key = manifest_key(project_id, restore_point_id)
        self.bucket.put(key, self.codec().seal(b"manifest", key, manifest.to_bytes()))

    def delete_manifest(self, project_id: str, restore_point_id: str) -> None:
        """The restore point's manifest goes; its chunks stay until a garbage collection
        finds no other manifest naming them."""
        self.bucket.delete(manifest_key(project_id, restore_point_id))

    def read_manifest(self, project_id: str, restore_point_id: str,
                      image_size: int) -> ObjectManifest:
        """`image_size`: the size Cairn's records give the restore point's image, which
        bounds what is read (`manifest_limit`)."""
        key = manifest_key(project_id, restore_point_id)
        what = f"the manifest of restore point {restore_point_id}"
        try:
            blob = self.bucket.get(key, limit=manifest_limit(image_size))
        except DataCorrupt as exc:
            raise DataCorrupt(f"{what} is corrupt: {exc.message}") from None
        if blob is None:
            raise DataCorrupt(f"{what} is missing from the object store")
        return ObjectManifest.from_bytes(self.codec().open(b"manifest", key, blob), what)
