"""The copy engine: moves a chunk plan from one open RBD image to another with a bounded
window of operations in flight (the one-op pipe of `rbd export | rbd import` is what makes
it slow), skipping all-zero data so the target stays sparse, checksumming what it writes
and, on restore, checking what it reads against the manifest.

librbd releases the GIL for reads and writes, so a pool of threads keeps `window`
operations in flight; memory is bounded by window x object size."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import rbd

from worker.engine.extents import Chunk
from worker.engine.manifest import Manifest, digest
from worker.engine.qos import TokenBucket
from worker.engine.zeros import data_runs, gaps


@dataclass
class CopyStats:
    bytes_total: int = 0
    """Bytes of the plan that the source holds (what must be read)."""
    bytes_done: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    bytes_zeroed: int = 0
    read_seconds: float = 0.0
    write_seconds: float = 0.0
    qos_wait_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


ProgressCallback = Callable[[CopyStats], None]


class CopyEngine:
    def __init__(self, *, window: int, bytes_per_second: int | None = None,
                 on_progress: ProgressCallback | None = None) -> None:
        self.window = window
        self.on_progress = on_progress
        self._bucket = None
        if bytes_per_second:
            # A burst of a quarter second keeps 1 s windows close to the limit.
            self._bucket = TokenBucket(bytes_per_second, burst=bytes_per_second / 4)
        self._lock = threading.Lock()

    def run(self, source: rbd.Image, target: rbd.Image, chunks: Sequence[Chunk], *,
            record: Manifest | None = None, verify: Manifest | None = None) -> CopyStats:
        """Copy `chunks`; fill `record` with digests of what was written, or check every
        chunk read against `verify`. Raises the first error after stopping the rest."""
        stats = CopyStats(bytes_total=sum(c.length for c in chunks if c.in_source))
        inflight: set[Future[None]] = set()

        def drain(block_until: int) -> None:
            while len(inflight) > block_until:
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for future in done:
                    inflight.discard(future)
                    future.result()  # re-raises a failed chunk's error here
                if self.on_progress:
                    self.on_progress(stats)

        with ThreadPoolExecutor(max_workers=self.window, thread_name_prefix="copy") as pool:
            try:
                for chunk in chunks:
                    drain(self.window - 1)
                    if self._bucket is not None and chunk.in_source:
                        stats.qos_wait_seconds += self._bucket.take(chunk.length)
                    inflight.add(pool.submit(self._copy_chunk, source, target, chunk, stats,
                                             record, verify))
                drain(0)
            except BaseException:
                for future in inflight:
                    future.cancel()
                raise
        if self.on_progress:
            self.on_progress(stats)
        return stats

    def _copy_chunk(self, source: rbd.Image, target: rbd.Image, chunk: Chunk,
                    stats: CopyStats, record: Manifest | None, verify: Manifest | None) -> None:
        data: bytes | None = None
        runs: list[tuple[int, int]] = []
        read_s = 0.0
        if chunk.in_source:
            t0 = time.monotonic()
            data = source.read(chunk.offset, chunk.length)
            read_s = time.monotonic() - t0
            if len(data) != chunk.length:
                raise OSError(f"short read at offset {chunk.offset}")
            runs = data_runs(data)
            if not runs:
                data = None
        if verify is not None:
            verify.check(chunk.index, data)
        t0 = time.monotonic()
        written = 0
        if data is not None:
            view = memoryview(data)
            for start, end in runs:
                target.write(bytes(view[start:end]) if (start, end) != (0, len(data)) else data,
                             chunk.offset + start)
                written += end - start
            if chunk.in_target:
                for start, end in gaps(runs, len(data)):
                    target.write_zeroes(chunk.offset + start, end - start)
        elif chunk.in_target:
            # Deallocates whole objects, zeroes partial ones: the target stays sparse.
            target.write_zeroes(chunk.offset, chunk.length)
        write_s = time.monotonic() - t0
        digest_value = digest(data) if record is not None and data is not None else None
        with self._lock:
            stats.read_seconds += read_s
            stats.write_seconds += write_s
            if chunk.in_source:
                stats.bytes_read += chunk.length
                stats.bytes_done += chunk.length
            stats.bytes_written += written
            if data is None and chunk.in_target:
                stats.bytes_zeroed += chunk.length
            if digest_value is not None and record is not None:
                record.digests[chunk.index] = digest_value
