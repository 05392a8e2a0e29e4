"""Runs as the parser hands them on (worker/files/parser/filesystems/base.py)."""

from __future__ import annotations

import io

import pytest

from worker.files.parser.errors import Unreadable
from worker.files.parser.filesystems.base import clip_runs, read_runs


def test_runs_are_cut_to_the_file_size_merged_and_padded_with_a_hole() -> None:
    assert clip_runs([(0, 4096), (4096, 4096), (None, 4096)], 5000, 1 << 20) == [(0, 5000)]
    assert clip_runs([(None, 10), (None, 10), (100, 5)], 40, 1 << 20) == [
        (None, 20), (100, 5), (None, 15)]


def test_a_run_outside_the_filesystem_is_unreadable() -> None:
    with pytest.raises(Unreadable):
        clip_runs([(1 << 20, 4096)], 4096, 1 << 20)
    with pytest.raises(Unreadable):
        clip_runs([(-4096, 4096)], 4096, 1 << 20)


def test_reading_through_runs_reads_holes_as_zeros() -> None:
    image = io.BytesIO(bytes(range(256)) * 4)
    runs = [(10, 4), (None, 3), (100, 4)]
    assert read_runs(image, runs, 0, 100) == bytes([10, 11, 12, 13, 0, 0, 0, 100, 101, 102, 103])
    assert read_runs(image, runs, 3, 5) == bytes([13, 0, 0, 0, 100])
