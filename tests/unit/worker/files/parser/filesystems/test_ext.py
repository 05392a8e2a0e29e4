"""ext4's block map as worker/files/parser/filesystems/ext.py reads it from an inode."""

from __future__ import annotations

import io
import struct

import pytest

from worker.files.parser.errors import Unreadable
from worker.files.parser.filesystems.ext import Ext


def ext(block_size: int = 4096) -> Ext:
    fs = Ext.__new__(Ext)
    fs.fh, fs.size, fs.block_size = io.BytesIO(), 1 << 30, block_size
    return fs


def leaf(*extents: tuple[int, int, int]) -> bytes:
    header = struct.pack("<HHHHI", 0xF30A, len(extents), 4, 0, 0)
    body = b"".join(struct.pack("<IHHI", logical, length, 0, start)
                    for logical, length, start in extents)
    return (header + body).ljust(60, b"\0")


def test_an_unwritten_extent_after_a_hole_reads_as_zeros_in_its_place() -> None:
    # blocks 0-1 written at 100, a hole at 2-4, blocks 5-7 preallocated (unwritten) at 300,
    # block 8 written at 400. Dissect's own map drops the hole before the unwritten extent
    # and so puts block 8's bytes at block 5.
    runs = ext()._extent_runs(leaf((0, 2, 100), (5, 0x8000 + 3, 300), (8, 1, 400)))
    assert runs == [(100, 2), (None, 3), (None, 3), (400, 1)]


def test_overlapping_extents_or_a_bad_magic_are_unreadable() -> None:
    with pytest.raises(Unreadable):
        ext()._extent_runs(leaf((0, 4, 100), (2, 4, 200)))
    with pytest.raises(Unreadable):
        ext()._extent_runs(b"\0" * 60)
