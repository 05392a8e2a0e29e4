"""An object-storage target opened with its keys: sealed chunks and manifests in a bucket.

Layout under the target's prefix: `services/storage/object_layout.py`.

Every manifest is complete on its own (an incremental lists the chunks it shares with its
base as well as the new ones), so deleting any restore point of a chain never breaks
another: a chunk is garbage only when no manifest names it."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from services.errors import (
    DataCorrupt,
    StorageUnavailable,
    TargetKeyUnavailable,
    TargetNeverWritten,
)
from services.storage.object_keys import (
    TargetKeys,
    new_data_key,
    unwrap_data_key,
    wrap_data_key,
)
from services.storage.object_layout import DATA_KEY, chunk_key, manifest_key
from services.storage.s3 import Bucket
from worker.engine.chunks import ChunkCodec, Sealed

_MANIFEST_MAGIC = b"CAIRNOM1"
_MANIFEST_HEADER = struct.Struct("<8sIQQ")  # magic, chunk size, image size, entries
_ENTRY = struct.Struct("<Q32s")  # chunk index, name (keyed BLAKE3)


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

    def __init__(self, bucket: Bucket, keys: TargetKeys) -> None:
        self.bucket = bucket
        self.keys = keys

    @classmethod
    def open(cls, bucket: Bucket, target: str, operator_key: bytes | None, *,
             create: bool = False) -> ChunkStore:
        """The store with its data key unwrapped; a target without one gets a new key when
        `create` (its first backup), and refuses otherwise."""
        if operator_key is None:
            raise TargetKeyUnavailable(
                f"target {target!r} is encrypted and no operator key is configured: "
                "nothing on it can be read or written")
        wrapped = bucket.get(DATA_KEY)
        if wrapped is None:
            if not create:
                raise TargetNeverWritten(
                    f"target {target!r} holds no data key: it has never been written to, or "
                    "the bucket or prefix is not the one it was made with")
            data_key = new_data_key()
            bucket.put(DATA_KEY, wrap_data_key(operator_key, target, data_key))
            # Two first backups racing would each write a key; the one stored wins and the
            # loser must use it, or its chunks would be unreadable.
            wrapped = bucket.get(DATA_KEY)
            if wrapped is None:
                raise StorageUnavailable(f"target {target!r} lost its data key just written")
        return cls(bucket, TargetKeys.from_data_key(target, unwrap_data_key(
            operator_key, target, wrapped)))

    def codec(self) -> ChunkCodec:
        return ChunkCodec(self.keys)

    def has_chunk(self, project_id: str, name: str) -> bool:
        return self.bucket.size(chunk_key(project_id, name)) is not None

    def put_chunk(self, project_id: str, sealed: Sealed) -> None:
        self.bucket.put(chunk_key(project_id, sealed.name), sealed.blob)

    def get_chunk(self, codec: ChunkCodec, project_id: str, name: str, offset: int) -> bytes:
        """The chunk's plaintext, checked; DataCorrupt naming the volume offset otherwise."""
        blob = self.bucket.get(chunk_key(project_id, name))
        if blob is None:
            raise DataCorrupt(f"the chunk at offset {offset} ({name}) is missing from the "
                              "object store")
        try:
            return codec.open_chunk(project_id, name, blob)
        except DataCorrupt as exc:
            raise DataCorrupt(f"the chunk at offset {offset} is corrupt: {exc.message}") from None

    def write_manifest(self, project_id: str, restore_point_id: str,
                       manifest: ObjectManifest) -> None:
        key = manifest_key(project_id, restore_point_id)
        self.bucket.put(key, self.codec().seal(b"manifest", key, manifest.to_bytes()))

    def delete_manifest(self, project_id: str, restore_point_id: str) -> None:
        """The restore point's manifest goes; its chunks stay until a garbage collection
        finds no other manifest naming them."""
        self.bucket.delete(manifest_key(project_id, restore_point_id))

    def read_manifest(self, project_id: str, restore_point_id: str) -> ObjectManifest:
        key = manifest_key(project_id, restore_point_id)
        blob = self.bucket.get(key)
        if blob is None:
            raise DataCorrupt(f"the manifest of restore point {restore_point_id} is missing "
                              "from the object store")
        what = f"the manifest of restore point {restore_point_id}"
        return ObjectManifest.from_bytes(self.codec().open(b"manifest", key, blob), what)
