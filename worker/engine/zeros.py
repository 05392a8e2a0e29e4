"""Finding the data inside a chunk, so that zeros are never written and the target stays
as sparse as the source, down to 4 KiB blocks (the allocation unit of BlueStore on SSD).

Scanning a 4 MiB chunk costs ~0.1 ms of CPU for data and ~0.3 ms for zeros, a few percent
of the CPU a 4 MiB copy costs in all. Where only "all zeros or not" matters (an object
target's upload skips such chunks whole), `all_zero` answers in ~0.2 us for data and one
memcmp (~0.06 ms) for zeros."""

from __future__ import annotations

BLOCK = 4096
_ZERO_BLOCK = bytes(BLOCK)
_PREFIX = 16
_ZERO_PREFIX = bytes(_PREFIX)
_ZEROS = bytes(4 << 20)
"""Compared against, never copied or written: calloc'd, so its pages are the kernel's one
zero page until touched, and comparing reads only them."""


def data_runs(data: bytes, block: int = BLOCK) -> list[tuple[int, int]]:
    """(start, end) byte ranges of `data` holding non-zero blocks, adjacent blocks merged.
    A chunk of zeros gives []; a dense chunk gives [(0, len(data))]."""
    zero = _ZERO_BLOCK if block == BLOCK else bytes(block)
    size = len(data)
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for offset in range(0, size, block):
        end = min(offset + block, size)
        # A 16-byte prefix settles almost every data block without copying it; a zero
        # block is then compared whole as bytes (memcmp; a memoryview compares per element,
        # ~25x slower on zeros).
        if end - offset == block and block >= _PREFIX:
            is_zero = data[offset:offset + _PREFIX] == _ZERO_PREFIX and data[offset:end] == zero
        else:  # the chunk's short tail
            is_zero = data[offset:end] == zero[: end - offset]
        if not is_zero and start is None:
            start = offset
        elif is_zero and start is not None:
            runs.append((start, offset))
            start = None
    if start is not None:
        runs.append((start, size))
    return runs


def all_zero(data: bytes | bytearray) -> bool:
    """Whether `data` holds only zero bytes: what `not data_runs(data)` answers, without a
    Python step per block. The first bytes settle a chunk that holds data at once; a zero
    one costs a memcmp (`bytes.startswith`, no copy) per 4 MiB."""
    if data[:_PREFIX] != _ZERO_PREFIX[:len(data)]:
        return False
    piece = len(_ZEROS)
    if len(data) <= piece:
        return _ZEROS.startswith(data)
    with memoryview(data) as view:
        return all(_ZEROS.startswith(view[offset:offset + piece])
                   for offset in range(0, len(data), piece))


def gaps(runs: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """The ranges of [0, size) between `runs`."""
    out, cursor = [], 0
    for start, end in runs:
        if start > cursor:
            out.append((cursor, start))
        cursor = end
    if cursor < size:
        out.append((cursor, size))
    return out
