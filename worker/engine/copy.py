"""The copy engine: moves a chunk plan from one open RBD image to another with a bounded
window of operations in flight (the one-op pipe of `rbd export | rbd import` is what makes
it slow), skipping all-zero data so the target stays sparse, pacing reads to the job's QoS,
checksumming what it writes and, on restore or verify, checking what it reads against the
manifest.

librbd releases the GIL for reads and writes, so a pool of threads keeps `window`
operations in flight (the prototype measured threads and librbd aio alike; threads keep
each chunk's read, scan, hash and write in one readable function). Memory is bounded by
window x chunk size: at most `window` chunks are read and not yet written."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import rados
import rbd

from services.errors import DataCorrupt
from services.storage import rbd_images
from worker.engine.extents import Chunk
from worker.engine.manifest import Manifest, digest
from worker.engine.qos import Pacer
from worker.engine.resume import ResumeMark
from worker.engine.zeros import data_runs, gaps

READ_HINTS = rados.LIBRADOS_OP_FLAG_FADVISE_SEQUENTIAL | rados.LIBRADOS_OP_FLAG_FADVISE_NOCACHE
"""Every read of a copy, restore or verify touches each object once: NOCACHE keeps
BlueStore from caching it, so a backup does not evict the tenants' hot data from the OSDs'
caches. librbd's own copy (`rbd cp`, deep copy) reads with the same flags. On the bench's
one-OSD cluster it changes no throughput beyond the noise (bench/README.md)."""

Digests = dict[int, bytes | None]
"""Object index -> digest of its data, or None when it now reads as zeros."""


@dataclass
class CopyStats:
    window: int = 1
    bytes_total: int = 0
    """Bytes of the plan that the source holds (what must be read), resumed part included."""
    bytes_done: int = 0
    bytes_resumed: int = 0
    """Part of bytes_total an earlier attempt had already copied (skipped this time)."""
    bytes_read: int = 0
    bytes_written: int = 0
    bytes_zeroed: int = 0
    operations: int = 0
    read_seconds: float = 0.0
    write_seconds: float = 0.0
    engine_seconds: float = 0.0
    """Zero scanning and checksumming, summed over the parallel operations."""
    qos_wait_seconds: float = 0.0
    resume_index: int = 0
    """Object index before which every chunk of the plan is done: the checkpoint."""
    resume_done: tuple[int, ...] = ()
    """Indexes past `resume_index` done too (a download's, few: `worker/engine/resume.py`);
    a retry need not redo them."""
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started


@dataclass(frozen=True)
class Unchanged:
    """What the target's head holds, by object: the digests of its base restore point, and
    the objects written on the head since (those are not known to hold them)."""

    digests: dict[int, bytes]
    dirty: frozenset[int]

    def holds(self, index: int, value: bytes | None) -> bool:
        return index not in self.dirty and self.digests.get(index) == value


ProgressCallback = Callable[[CopyStats], None]
"""Called from the submitting thread after chunks complete; raising stops the copy (a
cancelled or lost job)."""


def write(image: rbd.Image, data: bytes, offset: int) -> None:
    """Write and wait. Through `aio_write`, because a synchronous librbd write always copies
    the buffer, while an aio write with zero-copy writes enabled (CephClusters sets
    rbd_disable_zero_copy_writes=false) sends it as is: measured +28 % throughput and -8 %
    client CPU on a 2-core BlueStore machine (bench/README.md)."""
    finished = threading.Event()
    result = [0]

    def on_complete(completion: rbd.Completion) -> None:
        result[0] = completion.get_return_value()
        finished.set()

    image.aio_write(data, offset, on_complete)
    finished.wait()
    if result[0] < 0:
        raise OSError(-result[0], f"write of {len(data)} bytes at offset {offset} failed: "
                                  f"{os.strerror(-result[0])}")


def write_runs(target: rbd.Image, data: bytes, runs: list[tuple[int, int]], offset: int, *,
               clear_gaps: bool) -> int:
    """Write the `runs` of `data` (its non-zero ranges, `data_runs`) at `offset`, and zero
    the gaps between them when `clear_gaps` (the target may hold data there): the target
    stays sparse down to the block. Returns the operations made."""
    ops = 0
    view = memoryview(data)
    for start, end in runs:
        write(target, data if (start, end) == (0, len(data)) else bytes(view[start:end]),
              offset + start)
        ops += 1
    if clear_gaps:
        for start, end in gaps(runs, len(data)):
            target.write_zeroes(offset + start, end - start)
            ops += 1
    return ops


class CopyEngine:
    def __init__(self, *, window: int, pacer: Pacer | None = None,
                 on_progress: ProgressCallback | None = None) -> None:
        if window < 1:
            raise ValueError("the copy window must be at least 1")
        self.window = window
        self.pacer = pacer
        self.on_progress = on_progress
        self._lock = threading.Lock()
        self._unchanged: Unchanged | None = None

    def run(self, source: rbd.Image, target: rbd.Image | None, chunks: Sequence[Chunk], *,
            record: Digests | None = None, verify: Manifest | None = None,
            corrupt: list[int] | None = None, resumed_bytes: int = 0,
            new_target_pool: rados.Ioctx | None = None,
            unchanged: Unchanged | None = None) -> CopyStats:
        """Copy `chunks` (in object order) from `source` to `target`, or only read and check
        them when `target` is None. Fills `record` with the digest of every chunk, or checks
        each chunk read against `verify`: a mismatch raises DataCorrupt, or is appended to
        `corrupt` when a list is given. Raises the first error after stopping the rest.

        `new_target_pool`, for a target image created for this copy (nothing written to it,
        its handle not diffed): the pool it is in. Its objects are then marked in its object
        map up front (`rbd_images.mark_objects_existing`) and the ones found all zeros
        deallocated after the copy.

        `unchanged`: skip writing a chunk whose digest equals the one its target already
        holds (a source with no snapshot to diff against, such as an RBD group snapshot's
        member: everything is read, only what changed is written)."""
        self._unchanged = unchanged
        if new_target_pool is None or target is None:
            return self._run(source, target, chunks, record, verify, corrupt, resumed_bytes)
        marked = rbd_images.mark_objects_existing(new_target_pool, target,
                                                  (c.index for c in chunks if c.in_source))
        record = {} if record is None else record
        stats = self._run(source, target, chunks, record, verify, corrupt, resumed_bytes)
        if marked:
            _clear_unwritten(target, chunks, record)
        return stats

    def _run(self, source: rbd.Image, target: rbd.Image | None, chunks: Sequence[Chunk],
             record: Digests | None, verify: Manifest | None, corrupt: list[int] | None,
             resumed_bytes: int) -> CopyStats:
        mark = ResumeMark(len(chunks), lambda position: chunks[position].index)
        stats = CopyStats(window=self.window, bytes_resumed=resumed_bytes,
                          bytes_done=resumed_bytes,
                          bytes_total=resumed_bytes + sum(c.length for c in chunks if c.in_source),
                          resume_index=mark.index)
        inflight: dict[Future[None], int] = {}

        def drain(block_until: int) -> None:
            """Reap every finished chunk (progress, checkpoint and errors are then current
            even when QoS keeps the window from filling), blocking only while more than
            `block_until` chunks are in flight."""
            while True:
                finished: set[Future[None]] = {f for f in inflight if f.done()}
                if not finished:
                    if len(inflight) <= block_until:
                        return
                    finished, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for future in finished:
                    position = inflight.pop(future)
                    future.result()  # re-raises a failed chunk's error here
                    stats.resume_index = mark.done(position)
                if self.on_progress:
                    self.on_progress(stats)

        with ThreadPoolExecutor(max_workers=self.window, thread_name_prefix="copy") as pool:
            try:
                for position, chunk in enumerate(chunks):
                    drain(self.window - 1)
                    if self.pacer is not None and self.pacer.limited:
                        waited = self.pacer.take(chunk.length if chunk.in_source else 0)
                        stats.qos_wait_seconds += waited
                    inflight[pool.submit(self._copy_chunk, source, target, chunk, stats,
                                         record, verify, corrupt)] = position
                drain(0)
            except BaseException:
                for future in inflight:
                    future.cancel()
                raise
        stats.finished = time.monotonic()
        if self.on_progress:
            self.on_progress(stats)
        return stats

    def _copy_chunk(self, source: rbd.Image, target: rbd.Image | None, chunk: Chunk,
                    stats: CopyStats, record: Digests | None, verify: Manifest | None,
                    corrupt: list[int] | None) -> None:
        data: bytes | None = None
        runs: list[tuple[int, int]] = []
        read_s = engine_s = write_s = 0.0
        ops = 0
        if chunk.in_source:
            t0 = time.monotonic()
            data = source.read(chunk.offset, chunk.length, READ_HINTS)
            t1 = time.monotonic()
            read_s, ops = t1 - t0, 1
            if len(data) != chunk.length:
                raise OSError(f"short read at offset {chunk.offset}")
            runs = data_runs(data)
            if not runs:
                data = None
            engine_s += time.monotonic() - t1
        t0 = time.monotonic()
        value: bytes | None = None
        if verify is not None:
            try:
                value = verify.check(chunk.index, data)
            except DataCorrupt:
                if corrupt is None:
                    raise
                with self._lock:
                    corrupt.append(chunk.index)
        elif data is not None and (record is not None or self._unchanged is not None):
            value = digest(data)
        engine_s += time.monotonic() - t0
        written = 0
        if self._unchanged is not None and data is not None \
                and self._unchanged.holds(chunk.index, value):
            target = None  # the target has these bytes already
        if target is not None:
            t0 = time.monotonic()
            if data is not None:
                ops += write_runs(target, data, runs, chunk.offset, clear_gaps=chunk.in_target)
                written = sum(end - start for start, end in runs)
            elif chunk.in_target:
                # Deallocates whole objects, zeroes partial ones: the target stays sparse.
                target.write_zeroes(chunk.offset, chunk.length)
                ops += 1
            write_s = time.monotonic() - t0
        with self._lock:
            stats.read_seconds += read_s
            stats.write_seconds += write_s
            stats.engine_seconds += engine_s
            stats.operations += ops
            if chunk.in_source:
                stats.bytes_read += chunk.length
                stats.bytes_done += chunk.length
            stats.bytes_written += written
            if data is None and chunk.in_target:
                stats.bytes_zeroed += chunk.length
            if record is not None:
                record[chunk.index] = value


def _clear_unwritten(target: rbd.Image, chunks: Sequence[Chunk], record: Digests) -> None:
    """Deallocate the source chunks a copy found all zeros and so never wrote, after they
    were marked existing in the target's object map up front: the map, and every diff
    against the target, then shows no data there."""
    for chunk in chunks:
        if chunk.in_source and record.get(chunk.index) is None:
            target.write_zeroes(chunk.offset, chunk.length)
