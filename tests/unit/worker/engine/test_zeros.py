from __future__ import annotations

import pytest

from worker.engine.zeros import BLOCK, all_zero, data_runs, gaps


def test_all_zero_chunk_has_no_runs() -> None:
    assert data_runs(bytes(4 * BLOCK)) == []


def test_dense_chunk_is_one_run() -> None:
    assert data_runs(b"\x01" * (4 * BLOCK)) == [(0, 4 * BLOCK)]


def test_runs_are_block_aligned_and_merged() -> None:
    data = bytearray(8 * BLOCK)
    data[BLOCK + 5] = 1          # block 1
    data[2 * BLOCK] = 1          # block 2, adjacent: merged
    data[6 * BLOCK + BLOCK - 1] = 1  # block 6
    assert data_runs(bytes(data)) == [(BLOCK, 3 * BLOCK), (6 * BLOCK, 7 * BLOCK)]


def test_partial_last_block() -> None:
    data = bytes(BLOCK) + b"\x09" * 100
    assert data_runs(data) == [(BLOCK, BLOCK + 100)]


def test_gaps_are_the_complement() -> None:
    assert gaps([(10, 20), (30, 40)], 50) == [(0, 10), (20, 30), (40, 50)]
    assert gaps([], 8) == [(0, 8)]
    assert gaps([(0, 8)], 8) == []


@pytest.mark.parametrize("data", [
    b"", bytes(4 * BLOCK), bytes(4 << 20), bytes(9 << 20), bytes(BLOCK) + b"\x00" * 100,
    b"\x01" + bytes(4 * BLOCK - 1), bytes(4 * BLOCK - 1) + b"\x01", bytes(20) + b"\x01",
    bytes(BLOCK) + b"\x09" * 100, bytes((4 << 20) + 5) + b"\x01", bytes(3) + b"\x07",
], ids=["empty", "zeros", "4MiB zeros", "9MiB zeros", "short tail of zeros", "first byte",
        "last byte", "past the prefix", "partial last block", "past 4 MiB", "short"])
def test_all_zero_answers_as_the_scan_per_block(data: bytes) -> None:
    assert all_zero(data) == (not data_runs(data))
    assert all_zero(bytearray(data)) == (not data_runs(data))
