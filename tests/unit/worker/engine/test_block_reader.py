"""What every restore point reader does whatever its kind (`worker/engine/block_reader.py`):
any range reads as the restore point's bytes, across blocks and clipped at its end like a
file; holes are zeros and never fetched; checked blocks are cached within a byte budget,
least recently used first out; a read that needs several blocks fetches them `window` at
a time; a block's failed check fails the read. The blocks here are bytes in memory; the
kinds' fetches and checks have tests of their own (test_rbd_reader.py,
test_chunk_reader.py)."""

from __future__ import annotations

import random
import threading

import pytest

from services.errors import DataCorrupt
from worker.engine.block_reader import BlockReader, Extent, blocks_of, extents_of

BLOCK = 1000
SIZE = 10 * BLOCK + 337
"""Ten whole blocks and a short one."""


def _source(holes: set[int]) -> bytes:
    rng = random.Random(34)
    data = bytearray(rng.randbytes(SIZE))
    for index in holes:
        data[index * BLOCK:(index + 1) * BLOCK] = bytes(BLOCK)
    return bytes(data)


class Memory(BlockReader):
    """Blocks of `data`, counting fetches; `bad` blocks fail their check."""

    def __init__(self, data: bytes, holes: set[int], *, bad: frozenset[int] = frozenset(),
                 cache_bytes: int = 4 * BLOCK, window: int = 1,
                 barrier: threading.Barrier | None = None) -> None:
        blocks = -(-len(data) // BLOCK)
        super().__init__(size=len(data), block_size=BLOCK,
                         held={i for i in range(blocks) if i not in holes},
                         cache_bytes=cache_bytes, window=window)
        self.data, self.bad, self.barrier = data, bad, barrier
        self.fetched: list[int] = []

    def _fetch(self, index: int, offset: int, length: int) -> bytes:
        if self.barrier is not None:
            self.barrier.wait()
        self.fetched.append(index)
        if index in self.bad:
            raise DataCorrupt(f"block {index} (offset {offset}) does not match its checksum")
        return self.data[offset:offset + length]


def test_random_ranges_read_as_the_source_does_across_blocks_and_past_the_end() -> None:
    holes = {2, 3, 7}
    data = _source(holes)
    rng = random.Random(3401)
    with Memory(data, holes, cache_bytes=3 * BLOCK) as reader:
        assert reader.size == SIZE
        for _ in range(400):
            offset = rng.randrange(SIZE + BLOCK)
            length = rng.choice([0, 1, rng.randrange(BLOCK), rng.randrange(4 * BLOCK),
                                 rng.randrange(SIZE + BLOCK)])
            assert reader.read(offset, length) == data[offset:offset + length], (offset, length)
        assert reader.read(0, SIZE + 5) == data
        assert reader.read(SIZE - 1, 10) == data[-1:]
        assert reader.read(SIZE, 10) == b""
        assert set(reader.fetched).isdisjoint(holes)  # holes are zeros, never fetched


def test_pieces_are_a_block_each_and_a_whole_block_is_the_fetched_one_itself() -> None:
    """A download streams pieces: a block read whole is not copied (a 4 MiB copy per
    block, a 32 MiB one per join, was most of cairn-files' CPU beside librbd's)."""
    holes = {2}
    data = _source(holes)
    with Memory(data, holes, cache_bytes=16 * BLOCK) as reader:
        pieces = reader.pieces(BLOCK // 2, 4 * BLOCK)
        assert b"".join(pieces) == data[BLOCK // 2:BLOCK // 2 + 4 * BLOCK]
        assert [len(p) for p in pieces] == [BLOCK // 2, BLOCK, BLOCK, BLOCK, BLOCK // 2]
        cached = reader.pieces(BLOCK, BLOCK)[0]
        assert pieces[1] is cached  # the block as fetched (and cached), not a copy
        assert pieces[2] == bytes(BLOCK)  # a hole
        assert b"".join(reader.pieces(SIZE - 5, 10)) == data[-5:]


def test_the_blocks_of_a_range_stop_at_the_end() -> None:
    assert list(blocks_of(0, 1, SIZE, BLOCK)) == [0]
    assert list(blocks_of(BLOCK - 1, 2, SIZE, BLOCK)) == [0, 1]
    assert list(blocks_of(9 * BLOCK, 5 * BLOCK, SIZE, BLOCK)) == [9, 10]
    assert list(blocks_of(SIZE, 1, SIZE, BLOCK)) == []
    assert list(blocks_of(5, 0, SIZE, BLOCK)) == []


def test_extents_are_the_blocks_holding_data_merged_and_cut_at_the_end() -> None:
    assert extents_of({0, 1, 4, 10, 11, 99}, SIZE, BLOCK) == [
        Extent(0, 2 * BLOCK), Extent(4 * BLOCK, BLOCK), Extent(10 * BLOCK, 337)]
    assert extents_of(set(), SIZE, BLOCK) == []
    holes = {2, 3, 7}
    with Memory(_source(holes), holes) as reader:
        assert reader.extents() == [Extent(0, 2 * BLOCK), Extent(4 * BLOCK, 3 * BLOCK),
                                    Extent(8 * BLOCK, 2 * BLOCK + 337)]
        assert reader.fetched == []


def test_the_cache_keeps_recent_blocks_within_its_budget() -> None:
    data = _source(set())
    with Memory(data, set(), cache_bytes=3 * BLOCK) as reader:
        for index in range(11):
            reader.read(index * BLOCK + 10, 20)
            assert reader.cached_bytes <= 3 * BLOCK
        assert reader.fetched == list(range(11))
        reader.fetched.clear()
        reader.read(8 * BLOCK, 3 * BLOCK)  # the three most recent: no fetch
        assert reader.fetched == []
        reader.read(9 * BLOCK, 1)
        reader.read(0, 1)  # evicted long ago
        reader.read(10 * BLOCK, 1)  # kept: 9 and 10 were used since 8 was
        assert reader.fetched == [0]
        reader.read(8 * BLOCK, 1)  # 8 was the least recently used when 0 came in
        assert reader.fetched == [0, 8]
    assert reader.cached_bytes == 0  # a closed reader keeps nothing


def test_a_cache_smaller_than_a_block_keeps_nothing_and_reads_still_work() -> None:
    data = _source(set())
    with Memory(data, set(), cache_bytes=BLOCK - 1) as reader:
        assert reader.read(0, 2 * BLOCK) == data[:2 * BLOCK]
        assert reader.read(0, 2 * BLOCK) == data[:2 * BLOCK]
        assert reader.cached_bytes == 0
        assert reader.fetched == [0, 1, 0, 1]


def test_a_damaged_block_fails_the_read_and_no_byte_of_it_is_cached() -> None:
    data = _source(set())
    for window in (1, 4):
        with Memory(data, set(), bad=frozenset({5}), window=window) as reader:
            assert reader.read(0, 5 * BLOCK) == data[:5 * BLOCK]
            with pytest.raises(DataCorrupt, match=r"block 5 \(offset 5000\)"):
                reader.read(4 * BLOCK, 3 * BLOCK)
            with pytest.raises(DataCorrupt):
                reader.read(5 * BLOCK + 999, 1)  # asked again, checked again
            assert reader.read(6 * BLOCK, BLOCK) == data[6 * BLOCK:7 * BLOCK]


def test_a_read_of_several_blocks_fetches_window_at_a_time() -> None:
    data = _source(set())
    # Each fetch waits until three are in flight: a reader fetching one at a time would
    # break the barrier (its timeout) instead of reading.
    barrier = threading.Barrier(3, timeout=5)
    with Memory(data, set(), window=3, barrier=barrier, cache_bytes=0) as reader:
        assert reader.read(BLOCK, 3 * BLOCK) == data[BLOCK:4 * BLOCK]
        assert sorted(reader.fetched) == [1, 2, 3]


def test_bad_arguments_and_a_closed_reader_are_refused() -> None:
    reader = Memory(_source(set()), set())
    with pytest.raises(ValueError, match="a read of -1 bytes"):
        reader.read(0, -1)
    with pytest.raises(ValueError, match="at offset -1"):
        reader.read(-1, 1)
    released: list[str] = []
    reader.on_close(lambda: released.append("image"))
    reader.close()
    reader.close()
    assert released == ["image"]
    with pytest.raises(ValueError, match="closed"):
        reader.read(0, 1)
