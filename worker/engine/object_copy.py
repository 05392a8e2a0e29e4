"""Moving an RBD snapshot to an object-storage target, `window` chunks in flight.

Upload: each chunk is read from the snapshot, skipped when all zeros, named and sealed
(`chunks.py`), and sent only when the store lacks it. Chunks the base manifest names, and
chunks this upload already sent, are known to be there and are not even looked up; others
cost one HEAD. So a repeated full of unchanged data reads the volume and uploads nothing,
and a retried backup finds the chunks its failed attempt left and sends only the rest.

The way back, a restore and a verify, is `object_download.py`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol

import rbd

from worker.engine.chunk_store import ChunkStore, ObjectManifest
from worker.engine.chunks import ChunkCodec
from worker.engine.copy import READ_HINTS, CopyStats
from worker.engine.extents import allocated_objects, changed_objects, resized_objects
from worker.engine.qos import Pacer
from worker.engine.resume import ResumeMark
from worker.engine.zeros import all_zero

DEFAULT_CHUNK = 4 << 20


@dataclass
class TransferStats:
    chunks: int = 0
    """Chunks of the plan handled (read and sealed, or fetched and written)."""
    chunks_uploaded: int = 0
    chunks_known: int = 0
    """Chunks found in the store already (named by the base or looked up): not sent."""
    chunks_looked_up: int = 0
    """Chunks the upload asked the store for (one HEAD each)."""
    chunks_confirmed: int = 0
    """Chunks a killed attempt of the same upload confirmed stored (its checkpoint): not
    looked up again."""
    chunks_zero: int = 0
    bytes_read: int = 0
    bytes_sent: int = 0
    """Sealed (compressed, encrypted) bytes uploaded or downloaded."""
    bytes_new: int = 0
    """Data (before compression) of the chunks the base and `known` did not name: what the
    upload adds to its chain, whether sent now or found stored (another volume's, or a
    failed attempt's). The project's storage quota counts this."""
    bytes_written: int = 0
    hash_seal_seconds: float = 0.0
    """Naming, compressing and encrypting (or opening), summed over the threads."""
    store_seconds: float = 0.0
    name_cpu_seconds: float = 0.0
    """Thread CPU time (`time.thread_time`) of each stage of an upload, summed over the
    threads: naming (keyed BLAKE3), compressing, encrypting, asking the store whether it
    has a chunk (HEAD), and sending one (building the request and the socket's I/O, TLS
    included)."""
    compress_cpu_seconds: float = 0.0
    encrypt_cpu_seconds: float = 0.0
    lookup_cpu_seconds: float = 0.0
    send_cpu_seconds: float = 0.0


class Progress(Protocol):
    """Told how much there is to move, then how it goes (from the calling thread, after
    each chunk); raising stops the transfer (a cancel)."""

    def begin(self, stats: CopyStats) -> None: ...

    def tick(self, stats: CopyStats) -> None: ...


class _Window:
    """A pool of threads with at most `size` tasks submitted and not finished, each thread
    with a codec of its own. The first failure cancels what has not started and is raised."""

    def __init__(self, store: ChunkStore, size: int) -> None:
        self.size = size
        self._local = threading.local()
        self._store = store
        self._pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="object-copy")

    def codec(self) -> ChunkCodec:
        codec: ChunkCodec | None = getattr(self._local, "codec", None)
        if codec is None:
            codec = self._local.codec = self._store.codec()
        return codec

    def run(self, work: Callable[[int], None], items: Iterable[int],
            tick: Callable[[], None] | None = None) -> None:
        pending: set[Future[None]] = set()
        try:
            for item in items:
                if len(pending) >= self.size:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        future.result()
                    if tick is not None:
                        tick()
                pending.add(self._pool.submit(work, item))
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    future.result()
                if tick is not None:
                    tick()
        finally:
            for future in pending:
                future.cancel()
            self._pool.shutdown(wait=True)


def _chunks_of_objects(objects: Iterable[int], object_size: int, chunk_size: int,
                       image_size: int) -> set[int]:
    per_object = object_size // chunk_size
    return {index for obj in objects for index in range(obj * per_object, (obj + 1) * per_object)
            if index * chunk_size < image_size}


def upload(source: rbd.Image, store: ChunkStore, project_id: str, *,
           base: ObjectManifest | None = None, since: str | None = None,
           known: Iterable[str] = (), chunk_size: int = DEFAULT_CHUNK, window: int = 10,
           pacer: Pacer | None = None, stats: TransferStats | None = None,
           progress: Progress | None = None, confirmed_below: int = 0) -> ObjectManifest:
    """The manifest of `source` (an image opened at its snapshot) after sending what the
    store lacks. With `base` and `since` (the source snapshot `base` was made from), only
    the chunks changed since then are read; the others are taken from `base`. `known`:
    names of chunks the store has for certain (those of a manifest the caller keeps from
    being deleted meanwhile, e.g. the volume's last restore point when a full must be made
    because its source snapshot is gone): they are not looked up. `confirmed_below`: the
    chunk index below which an earlier attempt of this same upload confirmed every chunk
    stored (its checkpoint, `upload_checkpoint.py`): those are not looked up either. The
    figures' `resume_index` is the checkpoint to keep: every chunk of the plan below it is
    all zeros, known, or confirmed stored."""
    stats = stats if stats is not None else TransferStats()
    size = source.size()
    object_size = 1 << source.stat()["order"]
    if object_size % chunk_size:
        raise ValueError(f"chunk size {chunk_size} does not divide the object size {object_size}")
    manifest = ObjectManifest(chunk_size, size)
    if base is not None and since is not None and base.chunk_size == chunk_size:
        todo = _chunks_of_objects(changed_objects(source, size, object_size, since),
                                  object_size, chunk_size, size)
        # The last chunk of either size changed length although a diff may not list it.
        todo |= resized_objects(base.image_size, size, chunk_size)
        manifest.chunks = {index: name for index, name in base.chunks.items()
                           if index * chunk_size < size and index not in todo}
    else:
        todo = _chunks_of_objects(allocated_objects(source, size, object_size), object_size,
                                  chunk_size, size)
    known = set(known) | (base.names() if base is not None else set())
    lock = threading.Lock()
    transfer = _Window(store, window)
    moved = _begin(progress, window, sum(min(chunk_size, size - i * chunk_size) for i in todo))
    order = sorted(todo)
    mark = ResumeMark(len(order), order.__getitem__)
    moved.resume_index = mark.index

    def one(position: int) -> None:
        index = order[position]
        offset = index * chunk_size
        length = min(chunk_size, size - offset)
        if pacer is not None:
            pacer.take(length)
        t0 = time.monotonic()
        data = source.read(offset, length, READ_HINTS)
        if len(data) != length:
            raise OSError(f"short read at offset {offset}")
        t1 = time.monotonic()
        if all_zero(data):
            with lock:
                stats.chunks += 1
                stats.chunks_zero += 1
                stats.bytes_read += length
                moved.bytes_done += length
                moved.bytes_read += length
                moved.resume_index = mark.done(position)
            return
        codec = transfer.codec()
        # Named first, sealed only when the store lacks it: a repeated full of unchanged
        # data pays for one keyed hash per chunk, not for compression and encryption.
        c0 = time.thread_time()
        name = codec.name(project_id, data)
        name_cpu = time.thread_time() - c0
        t2 = time.monotonic()
        with lock:
            present = name in known
        new = not present
        confirmed = new and index < confirmed_below
        sent = 0
        seal_s = lookup_cpu = send_cpu = 0.0
        sealed = None
        if not present and not confirmed:
            c0 = time.thread_time()
            present = store.has_chunk(project_id, name)
            lookup_cpu = time.thread_time() - c0
            if not present:
                s0 = time.monotonic()
                sealed = codec.seal_chunk(project_id, data, name)
                seal_s = time.monotonic() - s0
                c0 = time.thread_time()
                store.put_chunk(project_id, sealed)
                send_cpu = time.thread_time() - c0
                sent = len(sealed.blob)
        t3 = time.monotonic()
        with lock:
            manifest.chunks[index] = name
            known.add(name)
            stats.chunks += 1
            stats.bytes_read += length
            stats.hash_seal_seconds += t2 - t1 + seal_s
            stats.store_seconds += t3 - t2 - seal_s + (t1 - t0)
            stats.name_cpu_seconds += name_cpu
            stats.lookup_cpu_seconds += lookup_cpu
            stats.send_cpu_seconds += send_cpu
            if sealed is not None:
                stats.compress_cpu_seconds += sealed.compress_cpu
                stats.encrypt_cpu_seconds += sealed.encrypt_cpu
            moved.bytes_done += length
            moved.bytes_read += length
            moved.bytes_written += sent
            if new:
                stats.bytes_new += length
            if confirmed:
                stats.chunks_confirmed += 1
            elif present:
                stats.chunks_known += 1
            else:
                stats.chunks_uploaded += 1
                stats.bytes_sent += sent
            if new and not confirmed:
                stats.chunks_looked_up += 1
            moved.resume_index = mark.done(position)

    transfer.run(one, range(len(order)), _ticker(progress, moved, lock))
    moved.finished = time.monotonic()
    return manifest


def _begin(progress: Progress | None, window: int, total: int, resumed: int = 0) -> CopyStats:
    moved = CopyStats(window=window, bytes_total=total, bytes_done=resumed,
                      bytes_resumed=resumed)
    if progress is not None:
        progress.begin(moved)
    return moved


def _ticker(progress: Progress | None, moved: CopyStats,
            lock: threading.Lock) -> Callable[[], None] | None:
    if progress is None:
        return None

    def tick() -> None:
        with lock:
            snapshot = CopyStats(**{k: getattr(moved, k) for k in moved.__dataclass_fields__})
        progress.tick(snapshot)
    return tick
