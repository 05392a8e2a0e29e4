"""A restore point on a chunk target (an object store, a directory), read at random
(`block_reader.py`): in the manifest's chunks, each fetched, authenticated, decrypted,
decompressed and checked against its name by `ChunkStore.get_chunk`, the check restore
and verify make. A chunk index the manifest does not list is a hole: zeros, never
fetched."""

from __future__ import annotations

import threading

from worker.engine.block_reader import DEFAULT_CACHE_BYTES, BlockReader
from worker.engine.chunk_store import ChunkStore, ObjectManifest
from worker.engine.chunks import ChunkCodec


class ChunkReader(BlockReader):
    def __init__(self, store: ChunkStore, project_id: str, manifest: ObjectManifest, *,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, window: int = 1) -> None:
        """`manifest`: the restore point's, opened with the store's key (its tag is what
        vouches for the chunk names, the size and the chunk size)."""
        super().__init__(size=manifest.image_size, block_size=manifest.chunk_size,
                         held=manifest.chunks.keys(), cache_bytes=cache_bytes, window=window)
        self._store = store
        self._project_id = project_id
        self._names = manifest.chunks
        self._local = threading.local()

    def _fetch(self, index: int, offset: int, length: int) -> bytes:
        return self._store.get_chunk(self._codec(), self._project_id, self._names[index],
                                     offset, length)

    def _codec(self) -> ChunkCodec:
        """This thread's codec (zstd's contexts are not thread-safe)."""
        codec: ChunkCodec | None = getattr(self._local, "codec", None)
        if codec is None:
            codec = self._local.codec = self._store.codec()
        return codec
