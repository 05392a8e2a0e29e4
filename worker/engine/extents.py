"""Which objects of an image hold data, and the chunk plan a copy works through.

Chunks are whole RADOS objects of the source: reads and writes then touch one object each,
which is what the OSDs serve best and what the checksum manifest is keyed by."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import rbd


@dataclass(frozen=True)
class Chunk:
    index: int
    offset: int
    length: int
    in_source: bool
    """The source has data here (it may still read as zeros)."""
    in_target: bool
    """The target has data here that must be overwritten or zeroed."""


def allocated_objects(image: rbd.Image, size: int, object_size: int) -> set[int]:
    """Indexes of the objects (of `object_size`) in which `image` has data, as of the
    snapshot it was opened at; the parent's data counts for clones."""
    found: set[int] = set()

    def on_extent(offset: int, length: int, exists: bool) -> int:
        if exists and length > 0:
            found.update(range(offset // object_size, (offset + length - 1) // object_size + 1))
        return 0

    # whole_object=True takes the object-map fast path when the image has fast-diff.
    image.diff_iterate(0, size, None, on_extent, include_parent=True, whole_object=True)
    return found


def plan_chunks(size: int, object_size: int, source: Iterable[int],
                target: Iterable[int] = ()) -> list[Chunk]:
    """Every object that must be written (source has data) or cleared (only the target has
    data), in offset order."""
    source_set, target_set = set(source), set(target)
    chunks = []
    for index in sorted(source_set | target_set):
        offset = index * object_size
        if offset >= size:
            continue
        chunks.append(Chunk(index=index, offset=offset, length=min(object_size, size - offset),
                            in_source=index in source_set, in_target=index in target_set))
    return chunks
