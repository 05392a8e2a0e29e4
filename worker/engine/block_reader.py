"""Random-access reads of a restore point, whatever keeps it: any byte range, assembled
from whole blocks (an RBD target's objects, a chunk target's chunks: the unit its manifest
checks), each block checked by its kind's one check as it is fetched. A damaged or
missing block raises DataCorrupt naming it; no byte of it is returned.

What every kind shares is here: the splitting of a range into blocks, holes (a block the
manifest records no data for reads as zeros and is never fetched), a bounded cache of
checked blocks, and the blocks one read lacks fetched `window` at a time. A kind says only
which blocks hold data and how one is fetched and checked (`rbd_reader.py`,
`chunk_reader.py`).

Why a cache, and in bytes: a file system is read in small pieces (a superblock, inode
tables, directory blocks) and each piece costs its whole block (4 MiB, fetched, hashed,
for a chunk also decrypted and decompressed). Recently used blocks are kept up to
`cache_bytes`; memory is that plus the blocks of the reads in progress."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import NamedTuple, Self

DEFAULT_CACHE_BYTES = 64 << 20
"""Sixteen 4 MiB blocks: a file system's metadata near one place, and a read-ahead window."""


class Extent(NamedTuple):
    offset: int
    length: int


def blocks_of(offset: int, length: int, size: int, block_size: int) -> range:
    """The indexes of the blocks holding bytes [offset, offset + length) of an image of
    `size` bytes: none past its end (a read there is clipped, as a file's is)."""
    end = min(offset + length, size)
    if offset >= end:
        return range(0)
    return range(offset // block_size, (end - 1) // block_size + 1)


def extents_of(held: Iterable[int], size: int, block_size: int) -> list[Extent]:
    """The byte ranges of the blocks in `held` (those past `size` left out, the last one
    cut at it), in order, adjacent blocks merged."""
    runs: list[list[int]] = []
    for index in sorted(held):
        start = index * block_size
        if start >= size:
            break
        stop = min(start + block_size, size)
        if runs and runs[-1][1] == start:
            runs[-1][1] = stop
        else:
            runs.append([start, stop])
    return [Extent(start, stop - start) for start, stop in runs]


class BlockReader(ABC):
    """A restore point's bytes, read by range. Safe to share between threads; `close`
    (or leaving its `with`) releases what the kind opened for it."""

    def __init__(self, *, size: int, block_size: int, held: Collection[int],
                 cache_bytes: int = DEFAULT_CACHE_BYTES, window: int = 1) -> None:
        """`held`: the blocks the manifest records data for (kept, not copied: a 10 TB
        volume's manifest names millions). `window`: blocks fetched at once for a read
        that needs several."""
        if block_size < 1 or size < 0 or cache_bytes < 0 or window < 1:
            raise ValueError(f"a reader of {size} bytes in blocks of {block_size}, caching "
                             f"{cache_bytes} bytes, {window} fetches at once")
        self.size = size
        self.block_size = block_size
        self.cache_bytes = cache_bytes
        self.window = window
        self._held = held
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._cached = 0
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._on_close: list[Callable[[], None]] = []
        self._closed = False

    @abstractmethod
    def _fetch(self, index: int, offset: int, length: int) -> bytes:
        """Block `index` (`length` bytes at `offset`, one the manifest records data for),
        checked by the kind's check: exactly its bytes, or DataCorrupt naming it."""

    def read(self, offset: int, length: int) -> bytes:
        """`length` bytes at `offset`, fewer where the restore point ends (none past it)."""
        return b"".join(self.pieces(offset, length))

    def pieces(self, offset: int, length: int) -> list[bytes]:
        """What `read` answers, as one piece per block: a block read whole is handed on
        as it was fetched, never copied. A download streams these: joining a piece of
        eight 4 MiB blocks cost a fresh 32 MiB buffer every piece (malloc maps that size
        anew each time, and the kernel zeroes it), a third of cairn-files' CPU."""
        if offset < 0 or length < 0:
            raise ValueError(f"a read of {length} bytes at offset {offset}")
        if self._closed:
            raise ValueError("read from a closed restore point reader")
        indexes = blocks_of(offset, length, self.size, self.block_size)
        blocks = self._blocks([i for i in indexes if i in self._held])
        end = min(offset + length, self.size)
        parts: list[bytes] = []
        for index in indexes:
            base = index * self.block_size
            start, stop = max(offset, base), min(end, base + self.block_size)
            block = blocks.get(index)
            if block is None:
                parts.append(bytes(stop - start))
            elif start == base and stop - start == len(block):
                parts.append(block)
            else:
                parts.append(block[start - base:stop - base])
        return parts

    def extents(self) -> list[Extent]:
        """Where the restore point may hold data, in order; every other byte reads as
        zeros without a fetch. A block listed may still read as zeros in part."""
        return extents_of(self._held, self.size, self.block_size)

    @property
    def cached_bytes(self) -> int:
        """Bytes of checked blocks kept now (never more than `cache_bytes`)."""
        with self._lock:
            return self._cached

    def on_close(self, release: Callable[[], None]) -> None:
        """Call `release` when the reader closes (what the kind opened for it)."""
        self._on_close.append(release)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._cache.clear()
            self._cached = 0
        while self._on_close:
            self._on_close.pop()()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def _blocks(self, wanted: list[int]) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        missing: list[int] = []
        with self._lock:
            for index in wanted:
                block = self._cache.get(index)
                if block is None:
                    missing.append(index)
                else:
                    self._cache.move_to_end(index)
                    found[index] = block
        fetched = self._fetch_all(missing)
        with self._lock:
            for index, block in fetched.items():
                self._keep(index, block)
        found.update(fetched)
        return found

    def _fetch_all(self, indexes: list[int]) -> dict[int, bytes]:
        if len(indexes) < 2 or self.window == 1:
            return {index: self._fetch_block(index) for index in indexes}
        pool = self._executor()
        futures = [(index, pool.submit(self._fetch_block, index)) for index in indexes]
        try:
            return {index: future.result() for index, future in futures}
        finally:
            for _index, future in futures:
                future.cancel()  # after a failure: what has not started does not

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.window,
                                                thread_name_prefix="restore-point-read")
            return self._pool

    def _fetch_block(self, index: int) -> bytes:
        offset = index * self.block_size
        return self._fetch(index, offset, min(self.block_size, self.size - offset))

    def _keep(self, index: int, block: bytes) -> None:
        """Cache `block` as the most recently used, dropping the least recently used
        beyond `cache_bytes` (a block larger than the whole cache is not kept)."""
        if index in self._cache or len(block) > self.cache_bytes:
            return
        self._cache[index] = block
        self._cached += len(block)
        while self._cached > self.cache_bytes:
            _index, dropped = self._cache.popitem(last=False)
            self._cached -= len(dropped)
