"""A chunk-format target opened with its keys: sealed chunks and manifests in its backend
(an S3 bucket, a directory: `services/storage/chunk_backend.py`).

Layout under the target's root: `services/storage/object_layout.py`.

Every manifest is complete on its own (an incremental lists the chunks it shares with its
base as well as the new ones), so deleting any restore point of a chain never breaks
another: a chunk is garbage only when no manifest names it."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

from services.db import Database
from services.errors import DataCorrupt
from services.storage import data_keys
from services.storage.chunk_backend import ChunkBackend
from services.storage.object_layout import chunk_key, manifest_key
from worker.engine.chunks import SEALING_OVERHEAD, ChunkCodec, Sealed

_MANIFEST_MAGIC = b"CAIRNOM1"
_MANIFEST_HEADER = struct.Struct("<8sIQQ")  # magic, chunk size, image size, entries
_ENTRY = struct.Struct("<Q32s")  # chunk index, name (keyed BLAKE3)
SMALLEST_CHUNK = 1 << 20
"""The smallest chunk size a target may have (`ObjectTargetSettings.chunk_size_mib`): what
bounds the entries of a manifest of a given image size, whatever the target's size was."""


UNSIZED_IMAGE_BYTES = 1 << 40
"""The image size assumed for a manifest no restore point row sizes (one the orphan
reconciler reports, a database restored from an older dump, a restore point whose size was
not recorded): read up to 40 MiB rather than refused."""


def manifest_limit(image_size: int | None) -> int:
    """The most bytes the stored manifest of an image of `image_size` bytes (None: not
    known, UNSIZED_IMAGE_BYTES) can hold: one entry per chunk at the smallest chunk size,
    sealed (never grown by compression)."""
    if image_size is None:
        image_size = UNSIZED_IMAGE_BYTES
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
    """One target's backend with its keys. Thread-safe except for `codec()`: each thread
    seals and opens with a codec of its own."""

    def __init__(self, db: Database, backend: ChunkBackend, target: str,
                 key: data_keys.DataKey) -> None:
        self.db = db
        self.backend = backend
        self.target = target
        self.key = key
        self.keys = key.keys

    @classmethod
    def open(cls, db: Database, backend: ChunkBackend, target: str, operator_key: bytes | None, *,
             create: bool = False) -> ChunkStore:
        """The store with the target's data key as Cairn's database records it and the
        backend holds it, unwrapped. A target with none gets its key when `create` (its
        first backup), made exactly once whoever else makes it at the same moment.
        Refused when the backend holds another key than the record (TargetKeyChanged),
        beside data or where the key was stored once (TargetKeyMissing), and without
        `create` (TargetNeverWritten). See `services/storage/data_keys.py`."""
        return cls(db, backend, target,
                   data_keys.opened(db, backend, target, operator_key, create=create))

    def check_key(self, operator_key: bytes | None) -> None:
        """Raises TargetKeyChanged unless the key this store seals with is still the one
        Cairn's database records and the backend holds: asked just before what it sealed is
        made available. `operator_key`: the one configured now (a rotation of the
        operator's key rewraps the same key)."""
        data_keys.check(self.db, self.backend, self.target, self.key, operator_key)

    def codec(self) -> ChunkCodec:
        return ChunkCodec(self.keys)

    def has_chunk(self, project_id: str, name: str) -> bool:
        return self.backend.size(chunk_key(project_id, name)) is not None

    def put_chunk(self, project_id: str, sealed: Sealed) -> None:
        self.backend.put(chunk_key(project_id, sealed.name), sealed.blob)

    def get_chunk(self, codec: ChunkCodec, project_id: str, name: str, offset: int,
                  length: int) -> bytes:
        """The chunk's plaintext of `length` bytes (what the manifest says the chunk at
        `offset` holds), checked; DataCorrupt naming the chunk and its volume offset
        otherwise. Nothing longer than such a chunk sealed is read. The one check of a
        chunk target's data: restore, verify and the restore point's reader share it
        (a restore in two steps, on different threads: `fetch_chunk`, then `open_chunk`)."""
        return self.open_chunk(codec, project_id, name, offset, length,
                               self.fetch_chunk(project_id, name, offset, length))

    def fetch_chunk(self, project_id: str, name: str, offset: int,
                    length: int) -> bytes | bytearray | None:
        """The sealed chunk as stored (None: missing), for `open_chunk`: the I/O half of
        `get_chunk`. DataCorrupt when the store answers with more than such a chunk sealed."""
        try:
            return self.backend.get(chunk_key(project_id, name), limit=length + SEALING_OVERHEAD)
        except DataCorrupt as exc:
            raise DataCorrupt(f"the chunk at offset {offset} is corrupt: {exc.message}") from None

    def open_chunk(self, codec: ChunkCodec, project_id: str, name: str, offset: int,
                   length: int, blob: bytes | bytearray | None) -> bytes:
        """The plaintext of `blob` (`fetch_chunk`'s answer), checked as `get_chunk` checks
        it: the CPU half."""
        try:
            data = None if blob is None else codec.open_chunk(project_id, name, blob)
        except DataCorrupt as exc:
            raise DataCorrupt(f"the chunk at offset {offset} is corrupt: {exc.message}") from None
        if data is None:
            raise DataCorrupt(f"the chunk at offset {offset} ({name}) is missing from the "
                              "target")
        if len(data) != length:
            raise DataCorrupt(f"the chunk at offset {offset} ({name}) holds {len(data)} "
                              f"bytes, not {length}")
        return data

    def write_manifest(self, project_id: str, restore_point_id: str,
                       manifest: ObjectManifest) -> None:
        key = manifest_key(project_id, restore_point_id)
        self.backend.put(key, self.codec().seal(b"manifest", key, manifest.to_bytes()))

    def delete_manifest(self, project_id: str, restore_point_id: str) -> None:
        """The restore point's manifest goes; its chunks stay until a garbage collection
        finds no other manifest naming them."""
        self.backend.delete(manifest_key(project_id, restore_point_id))

    def read_manifest(self, project_id: str, restore_point_id: str,
                      image_size: int | None) -> ObjectManifest:
        """`image_size`: the size Cairn's records give the restore point's image, which
        bounds what is read (`manifest_limit`; None when they give none)."""
        key = manifest_key(project_id, restore_point_id)
        what = f"the manifest of restore point {restore_point_id}"
        try:
            blob = self.backend.get(key, limit=manifest_limit(image_size))
        except DataCorrupt as exc:
            raise DataCorrupt(f"{what} is corrupt: {exc.message}") from None
        if blob is None:
            raise DataCorrupt(f"{what} is missing from the target")
        return ObjectManifest.from_bytes(self.codec().open(b"manifest", key, blob), what)
