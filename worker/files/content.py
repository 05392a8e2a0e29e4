"""A file's bytes out of a restore point, for a download, an archive or a version's hash.

Where the file's data lies in plain blocks, the parser says where once (`runs`: the disk
ranges that hold it, in order, holes as None) and the bytes are read straight off the
restore point's reader: no parser round trip per byte, and each read large enough that
the reader fetches several blocks at once. Where it does not (compressed or resident NTFS
data, inline ext4 data, a file too fragmented to list), the parser reads it, `READ_BYTES`
a call.

The parser's answer is the tenant's filesystem speaking: runs that do not add up to the
file's size or point past the volume are refused (FilesUnreadable), never followed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from services.errors import FilesUnreadable, ParserLimitExceeded
from worker.files.calls import READ_BYTES, ParserCalls
from worker.files.stream import Produced, Put
from worker.targets.reader import RestorePointReader

MAX_RUNS = 100_000
"""Runs one file may be read by; a file in more pieces is read through the parser."""

PIECE_BLOCKS = 8
"""Blocks of the restore point one read off the reader covers: the reader fetches them at
once (eight 4 MiB objects or chunks in flight; two were 0.79x of the object target's
restore rate in bench/files.py, eight 0.99x)."""

WINDOW = 2 * PIECE_BLOCKS
"""Pieces read ahead of the client, a piece a block (or less, at a run's ends): with 4 MiB
blocks, a download holds up to 96 MiB (one read of PIECE_BLOCKS being fetched, two reads'
worth ahead)."""


def file_pieces(calls: ParserCalls, reader: RestorePointReader, partition: int | None,
                path: str, size: int, start: int, end: int) -> Iterator[bytes]:
    """Bytes [start, end) of the regular file `path` of `size` bytes, in pieces."""
    if not 0 <= start <= end <= size:
        raise ValueError(f"bytes {start}-{end} of a file of {size}")
    if start == end:
        return
    try:
        layout = calls.runs(partition, path, MAX_RUNS)
    except ParserLimitExceeded:
        layout = None  # too many runs to list: the parser reads it
    if layout is None:
        yield from _read_through_parser(calls, partition, path, start, end)
    else:
        yield from _read_runs(reader, path, _checked_runs(layout, path, size, reader),
                              start, end)


def prefetched(calls: ParserCalls, reader: RestorePointReader, partition: int | None,
               path: str, size: int, start: int, end: int) -> Produced:
    """`file_pieces`, read on a thread of its own `WINDOW` pieces ahead of the consumer;
    close it (or leave its `with`) before the reader or the session is released."""

    def produce(put: Put) -> None:
        for piece in file_pieces(calls, reader, partition, path, size, start, end):
            put(piece)

    return Produced(produce, window=WINDOW, name=f"cairn-files read {path[-40:]}")


def _read_through_parser(calls: ParserCalls, partition: int | None, path: str, start: int,
                         end: int) -> Iterator[bytes]:
    offset = start
    while offset < end:
        want = min(READ_BYTES, end - offset)
        data = calls.read(partition, path, offset, want)
        if len(data) != want:
            raise FilesUnreadable(f"{path}: the filesystem gave {len(data)} bytes at offset "
                                  f"{offset} where the file holds {want}", path=path)
        yield data
        offset += want


def _checked_runs(layout: dict[str, Any], path: str, size: int,
                  reader: RestorePointReader) -> list[tuple[int | None, int]]:
    runs: list[tuple[int | None, int]] = []
    total = 0
    for run in layout.get("runs", []):
        disk, length = run
        if not isinstance(length, int) or length < 0 or not (
                disk is None or (isinstance(disk, int) and disk >= 0
                                 and disk + length <= reader.size)):
            raise FilesUnreadable(f"{path}: the filesystem places the file's data outside "
                                  "the volume (a damaged filesystem)", path=path)
        runs.append((disk, length))
        total += length
    if total != size or layout.get("size", size) != size:
        raise FilesUnreadable(f"{path}: the filesystem's extents of the file hold {total} "
                              f"bytes where its size is {size} (a damaged filesystem)",
                              path=path)
    return runs


def _read_runs(reader: RestorePointReader, path: str,
               runs: list[tuple[int | None, int]], start: int, end: int) -> Iterator[bytes]:
    piece = max(1, PIECE_BLOCKS * reader.block_size)
    position = 0  # where in the file the current run starts
    for disk, length in runs:
        first, last = max(start, position), min(end, position + length)
        offset = first
        while offset < last:
            if disk is None:  # a hole: zeros, nothing fetched
                want = min(piece, last - offset)
                yield bytes(want)
            else:
                at = disk + offset - position
                # To the next piece boundary of the disk: each read covers whole blocks.
                want = min(piece - at % piece, last - offset)
                parts = reader.pieces(at, want)
                if sum(len(part) for part in parts) != want:
                    raise FilesUnreadable(f"{path}: the file's data at volume offset {at} "
                                          "lies past the volume's end", path=path)
                yield from parts
            offset += want
        position += length
        if position >= end:
            return


def volume_bound(calls: ParserCalls, reader: RestorePointReader,
                 partition: int | None) -> int:
    """The most a file of `partition` can hold: its partition's size, within the restore
    point's (the partitions are the parser's answer; the restore point's size is not)."""
    bound = reader.size
    for found in calls.partitions():
        if found.get("index") == partition or (partition is None and found.get("readable")):
            size = found.get("size")
            if isinstance(size, int) and size >= 0:
                bound = min(bound, size)
            break
    return bound


def within(bound: int, path: str, size: int) -> None:
    """A file no larger than the volume holding it: a size past it is a crafted or damaged
    filesystem's (its holes would stream zeros for ever), refused as unreadable."""
    if size > bound:
        raise FilesUnreadable(f"{path}: the filesystem says the file holds {size} bytes, "
                              f"more than the {bound} of its volume (a damaged filesystem)",
                              path=path)
