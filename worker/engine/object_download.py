"""Restoring and verifying a restore point of a chunk target (an object store, a
directory): its manifest's chunks fetched many at once, out of order, opened (checked,
decrypted, decompressed) on a few threads, and written through the copy engine's write
path (`fetch_window.py`).

Every chunk is authenticated and checked against its name before a byte of it is written:
a corrupt or missing chunk fails the restore with its offset, and nothing of it is
written. Holes and all-zero blocks stay sparse on a new image and are zeroed on an existing
one."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterable, Sequence

import rbd

from services.errors import DataCorrupt
from worker.engine.chunk_store import ChunkStore, ObjectManifest
from worker.engine.chunks import ChunkCodec
from worker.engine.copy import CopyStats, write_runs
from worker.engine.fetch_window import FetchWindow, Limits, cores
from worker.engine.object_copy import Progress, TransferStats
from worker.engine.qos import Pacer
from worker.engine.zeros import data_runs

DOWNLOADS_IN_FLIGHT = 16
"""Chunks a restore fetches at once unless its target says (`downloads_in_flight`)."""
WRITES_IN_FLIGHT = 16
"""Writes in flight unless the caller gives the copy engine's window (`copy_window`)."""


def default_opens(fetches: int) -> int:
    """Threads opening chunks: the cores, never more than the fetches that feed them."""
    return max(1, min(cores(), fetches))


class _Chunks:
    """The chunks at a plan's positions: where they go, and each thread's codec."""

    def __init__(self, store: ChunkStore, project_id: str, manifest: ObjectManifest,
                 indexes: Sequence[int]) -> None:
        self.store = store
        self.project_id = project_id
        self.manifest = manifest
        self.indexes = indexes
        self._local = threading.local()

    def where(self, position: int) -> tuple[str | None, int, int]:
        """The chunk's name (None: a hole), offset and length."""
        index = self.indexes[position]
        offset = index * self.manifest.chunk_size
        return (self.manifest.chunks.get(index), offset,
                min(self.manifest.chunk_size, self.manifest.image_size - offset))

    def fetched(self, position: int) -> bool:
        return self.indexes[position] in self.manifest.chunks

    def fetch(self, position: int) -> bytes | bytearray | None:
        name, offset, length = self.where(position)
        assert name is not None
        return self.store.fetch_chunk(self.project_id, name, offset, length)

    def open(self, position: int, blob: bytes | bytearray | None) -> bytes:
        name, offset, length = self.where(position)
        assert name is not None
        return self.store.open_chunk(self._codec(), self.project_id, name, offset, length,
                                     blob)

    def write(self, position: int, data: bytes | None) -> None:
        raise NotImplementedError("a verify writes nothing")

    def _codec(self) -> ChunkCodec:
        """This thread's codec (zstd's contexts are not thread-safe)."""
        codec: ChunkCodec | None = getattr(self._local, "codec", None)
        if codec is None:
            codec = self._local.codec = self.store.codec()
        return codec


class _Restore(_Chunks):
    def __init__(self, store: ChunkStore, project_id: str, manifest: ObjectManifest,
                 indexes: Sequence[int], target: rbd.Image, *, target_is_new: bool) -> None:
        super().__init__(store, project_id, manifest, indexes)
        self.target = target
        self.target_is_new = target_is_new
        self.lock = threading.Lock()
        self.operations = self.bytes_written = self.bytes_zeroed = 0

    def write(self, position: int, data: bytes | None) -> None:
        _name, offset, length = self.where(position)
        if data is None:
            # Deallocates whole objects, zeroes partial ones: the target stays sparse.
            self.target.write_zeroes(offset, length)
            ops, written, zeroed = 1, 0, length
        else:
            runs = data_runs(data)
            ops = write_runs(self.target, data, runs, offset,
                             clear_gaps=not self.target_is_new)
            written = sum(end - start for start, end in runs)
            zeroed = 0 if self.target_is_new else length - written
        with self.lock:
            self.operations += ops
            self.bytes_written += written
            self.bytes_zeroed += zeroed


def download(store: ChunkStore, project_id: str, manifest: ObjectManifest, target: rbd.Image,
             *, target_is_new: bool, start: int = 0, done: Collection[int] = (),
             fetches: int = DOWNLOADS_IN_FLIGHT, opens: int | None = None,
             writes: int = WRITES_IN_FLIGHT, pacer: Pacer | None = None,
             stats: TransferStats | None = None, progress: Progress | None = None) -> CopyStats:
    """Writes the manifest's data into `target` (at least the manifest's size). A target
    that is not new (a restore in place, or resumed) has every hole the manifest leaves
    zeroed. `start`: the chunk index before which an earlier attempt wrote everything (its
    checkpoint), and `done`: the chunks past it it wrote too; the others from `start` on
    are written. The figures' `resume_index` and `resume_done` are the checkpoint to keep;
    `bytes_read` counts the chunks fetched (a resumed one is not).

    `fetches` chunks are fetched at once, `opens` (default: the cores) opened at once,
    `writes` (the copy engine's window) written at once. Memory: at most
    `Limits.held_bytes` of chunk data, (fetches + opens + writes) x (chunk size + 32 B)
    + opens x chunk size: 144 MiB at 16 fetches, 2 opens, 16 writes and 4 MiB chunks."""
    stats = stats if stats is not None else TransferStats()
    chunk_size, size = manifest.chunk_size, manifest.image_size
    done = frozenset(i for i in done if i >= start)

    def length_of(index: int) -> int:
        return min(chunk_size, size - index * chunk_size)

    everything = (range(start, (size + chunk_size - 1) // chunk_size) if not target_is_new
                  else sorted(i for i in manifest.chunks if i >= start))
    indexes = [i for i in everything if i not in done]
    limits = Limits(fetches, opens or default_opens(fetches), writes)
    moved = CopyStats(window=fetches, bytes_total=sum(length_of(i) for i in manifest.chunks))
    moved.bytes_resumed = moved.bytes_done = sum(
        length_of(i) for i in manifest.chunks if i < start or i in done)
    if progress is not None:
        progress.begin(moved)
    chunks = _Restore(store, project_id, manifest, indexes, target,
                      target_is_new=target_is_new)

    def pace(position: int) -> float:
        assert pacer is not None
        if not pacer.limited:
            return 0.0
        return pacer.take(length_of(indexes[position]) if chunks.fetched(position) else 0)

    def on_done(position: int) -> None:
        if not chunks.fetched(position):
            return
        length = length_of(indexes[position])
        stats.chunks += 1
        stats.bytes_written += length
        moved.bytes_done += length
        moved.bytes_read += length

    def tick() -> None:
        with chunks.lock:
            moved.operations = chunks.operations
            moved.bytes_written = chunks.bytes_written
            moved.bytes_zeroed = chunks.bytes_zeroed
        if progress is not None:
            progress.tick(moved)

    window = FetchWindow(indexes, chunks, limits, moved, fetched=chunks.fetched,
                         pace=pace if pacer is not None else None, on_done=on_done,
                         earlier=done)
    try:
        window.run(tick)
    finally:
        stats.store_seconds += moved.read_seconds
        stats.hash_seal_seconds += moved.engine_seconds
    moved.finished = time.monotonic()
    return moved


def verify(store: ChunkStore, project_id: str, manifest: ObjectManifest, *,
           fetches: int = DOWNLOADS_IN_FLIGHT, opens: int | None = None,
           pacer: Pacer | None = None, progress: Progress | None = None,
           only: Iterable[int] | None = None) -> tuple[CopyStats, list[tuple[int, str]]]:
    """Re-reads every chunk the manifest lists (or those of `only`) and checks it, fetching
    and opening as `download` does; the figures, and (offset, reason) of each corrupt or
    missing chunk, in offset order."""
    found: list[tuple[int, str]] = []
    size = manifest.image_size
    indexes = sorted(manifest.chunks if only is None else set(only) & set(manifest.chunks))

    def length_of(index: int) -> int:
        return min(manifest.chunk_size, size - index * manifest.chunk_size)

    moved = CopyStats(window=fetches, bytes_total=sum(length_of(i) for i in indexes))
    if progress is not None:
        progress.begin(moved)
    chunks = _Chunks(store, project_id, manifest, indexes)

    def pace(position: int) -> float:
        assert pacer is not None
        return pacer.take(length_of(indexes[position])) if pacer.limited else 0.0

    def on_done(position: int) -> None:
        length = length_of(indexes[position])
        moved.bytes_done += length
        moved.bytes_read += length

    def on_corrupt(position: int, exc: DataCorrupt) -> None:
        found.append((indexes[position] * manifest.chunk_size, exc.message))

    window = FetchWindow(indexes, chunks, Limits(fetches, opens or default_opens(fetches)),
                         moved, fetched=chunks.fetched, on_done=on_done,
                         on_corrupt=on_corrupt, pace=pace if pacer is not None else None)
    window.run(None if progress is None else lambda: progress.tick(moved))
    moved.finished = time.monotonic()
    return moved, sorted(found)
