"""Which objects of an image hold data or changed, and the chunk plan a copy works through.

Chunks are whole RADOS objects of the source: reads and writes then touch one object each,
which is what the OSDs serve best and what the checksum manifest is keyed by.

Extents come from `diff_iterate(whole_object=True)`: with fast-diff and a valid object map
librbd answers from the object map (~1 ms for 4 GiB); otherwise it falls back by itself to
listing the objects' snapshots, one RADOS op per object, with the same answer."""

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
    """The target may have data here that must be overwritten or zeroed."""


def _objects(image: rbd.Image, size: int, object_size: int, since: str | None,
             want_exists: bool | None) -> set[int]:
    found: set[int] = set()

    def on_extent(offset: int, length: int, exists: bool) -> int:
        if length > 0 and (want_exists is None or exists == want_exists):
            found.update(range(offset // object_size, (offset + length - 1) // object_size + 1))
        return 0

    if size > 0:
        # include_parent: a clone (Cinder's volumes from images) reads its parent's data
        # where it has none of its own, and that data is part of the volume.
        image.diff_iterate(0, size, since, on_extent, include_parent=True, whole_object=True)
    return found


def allocated_objects(image: rbd.Image, size: int, object_size: int) -> set[int]:
    """Objects in which `image` has data (as of the snapshot it was opened at), its
    parent's included for clones."""
    return _objects(image, size, object_size, None, True)


def changed_objects(image: rbd.Image, size: int, object_size: int, since: str) -> set[int]:
    """Objects written, discarded or zeroed between snapshot `since` and the image as
    opened (a snapshot or the head)."""
    return _objects(image, size, object_size, since, None)


def resized_objects(old_size: int, new_size: int, object_size: int) -> set[int]:
    """Objects whose length within the image changed with a resize from `old_size` to
    `new_size`: the partial last object of either size (when it lies inside the new size).
    Their checksum covers a different length now, although a diff may not list them (a
    grow writes nothing; the new tail of the old last object reads as zeros)."""
    if old_size == new_size:
        return set()
    found = set()
    for edge in (old_size, new_size):
        if edge % object_size:
            index = edge // object_size
            if index * object_size < new_size:
                found.add(index)
    return found


def plan_chunks(size: int, object_size: int, source: Iterable[int],
                target: Iterable[int] = (), *, only: Iterable[int] | None = None,
                start: int = 0) -> list[Chunk]:
    """Chunks, in offset order, for the objects that must be written (the source has data)
    or cleared (only the target has data): all of them, or those in `only` (an incremental's
    changed objects); none before object `start` (a resumed copy's checkpoint)."""
    source_set, target_set = set(source), set(target)
    candidates = source_set | target_set if only is None else set(only)
    chunks = []
    for index in sorted(candidates):
        offset = index * object_size
        if index < start or offset >= size:
            continue
        in_source, in_target = index in source_set, index in target_set
        if in_source or in_target:
            chunks.append(Chunk(index=index, offset=offset,
                                length=min(object_size, size - offset),
                                in_source=in_source, in_target=in_target))
    return chunks
