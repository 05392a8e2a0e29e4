"""A restore point on an RBD target, read at random (`block_reader.py`): its backup image
opened at the backup snapshot, read in whole RADOS objects, the unit the manifest records
a digest for, each checked with `Manifest.check`, the check restore and verify make. An
object the manifest records no data for is a hole: zeros, never read (verify is what
compares the snapshot's allocation with the manifest)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import rados
import rbd

from services.errors import DataCorrupt
from worker.engine.block_reader import DEFAULT_CACHE_BYTES, BlockReader
from worker.engine.manifest import Manifest

READ_HINTS = rados.LIBRADOS_OP_FLAG_FADVISE_RANDOM | rados.LIBRADOS_OP_FLAG_FADVISE_NOCACHE
"""NOCACHE as the copy engine's reads (`copy.READ_HINTS`): what a reader reads again, its
own cache keeps, and the OSDs' cache stays the tenants'. RANDOM, not SEQUENTIAL: a reader
jumps."""


class RbdReader(BlockReader):
    def __init__(self, image: rbd.Image, manifest: Manifest, *,
                 boundary: Callable[[], AbstractContextManager[object]] = nullcontext,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, window: int = 1) -> None:
        """`image`: open at the restore point's backup snapshot, read-only; DataCorrupt
        unless the manifest describes an image of its size and object size. `boundary`:
        where librbd's errors become Cairn's (`CephClusters.boundary`), around each read
        (the `with` that opened the image has been left)."""
        size = image.size()
        object_size = 1 << image.stat()["order"]
        manifest.check_shape(size, object_size)
        super().__init__(size=size, block_size=object_size, held=manifest.digests.keys(),
                         cache_bytes=cache_bytes, window=window)
        self._image = image
        self._manifest = manifest
        self._boundary = boundary

    def _fetch(self, index: int, offset: int, length: int) -> bytes:
        with self._boundary():
            data = self._image.read(offset, length, READ_HINTS)
        if len(data) != length:
            raise DataCorrupt(f"object {index} (offset {offset}) of the restore point reads "
                              f"{len(data)} bytes, not {length}", object_index=index)
        self._manifest.check(index, data)
        return data
