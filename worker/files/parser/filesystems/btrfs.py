"""Btrfs (dissect.btrfs), the default subvolume; other subvolumes appear as the directories
they are mounted at.

A file's runs map its extents' logical addresses to the device through the chunk tree,
for chunks with one copy or two identical ones (single, DUP: the first copy); a compressed,
encrypted or inline extent, or a striped chunk (RAID), gives no runs and is read through
Dissect's stream. A lookup scans the directory: Dissect's hashed lookup returns the first
name with the same hash without comparing the name."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any, BinaryIO

from dissect.btrfs import Btrfs as DissectBtrfs
from dissect.btrfs.c_btrfs import BTRFS_BLOCK_GROUP, BTRFS_BLOCK_GROUP_PROFILE_MASK, c_btrfs
from dissect.btrfs.stream import ExtentStream
from dissect.btrfs.tree import Cursor

from ..errors import Unreadable
from .base import Filesystem, Info, Node, Run, clip_runs, link_target, type_of_mode

_SUPERBLOCK_MAGIC_AT = 0x10000 + 0x40
_MAX_LEVEL = 7
"""BTRFS_MAX_LEVEL is 8: levels 0 to 7."""


def _checked_push(cursor: Any, address: int, initial_index: int = 0) -> None:
    """Dissect's Cursor.push, refusing a node no B-tree can hold: an empty one (Dissect's
    binary search over 0 items loops for ever), one with more items than fit in it, or one
    that is not exactly one level below its parent (a node pointing at itself or above it
    makes Dissect's search descend for ever)."""
    parent = cursor._header
    _dissect_push(cursor, address, initial_index)
    header = cursor._header
    item = len(c_btrfs.btrfs_key_ptr if header.level else c_btrfs.btrfs_item)
    capacity = (len(cursor._node) - len(c_btrfs.btrfs_header)) // item
    if (header.level > _MAX_LEVEL or not 0 < header.nritems <= capacity
            or (parent is not None and header.level != parent.level - 1)):
        raise Unreadable(f"a damaged B-tree node at {address:#x} (level {header.level}, "
                         f"{header.nritems} items)")


_dissect_push = Cursor.push
Cursor.push = _checked_push  # every Btrfs of the process reads its trees through it


class Btrfs(Filesystem):
    kind = "btrfs"

    def __init__(self, fh: BinaryIO, size: int) -> None:
        super().__init__(fh, size)
        self.fs: Any = DissectBtrfs(fh)

    @classmethod
    def probe(cls, fh: BinaryIO, size: int) -> bool:
        fh.seek(_SUPERBLOCK_MAGIC_AT)
        return fh.read(8) == b"_BHRfS_M"

    @property
    def name(self) -> str:
        return "btrfs"

    @property
    def label(self) -> str | None:
        return self.fs.label or None

    def root(self) -> Node:
        return self.fs.root

    def children(self, node: Node) -> Iterator[tuple[str, Node]]:
        for name, child in node.iterdir():
            if name not in (".", ".."):
                yield name, child

    def identity(self, node: Node) -> Hashable:
        return (int(node.subvolume.objectid), int(node.inum))

    def info(self, node: Node) -> Info:
        mode = int(node.mode)
        kind = type_of_mode(mode)
        return Info(type=kind, size=int(node.size), mode=mode,
                    uid=int(node.uid), gid=int(node.gid), mtime_ns=int(node.mtime_ns),
                    target=link_target(node, int(node.size)) if kind == "symlink" else None)

    def runs(self, node: Node) -> list[Run] | None:
        size = int(node.size)
        if size == 0:
            return []
        stream = node.open()
        if not isinstance(stream, ExtentStream):
            return None  # inline data
        runs: list[Run] = []
        for extent in stream.extents:
            if (extent.disk_offset, extent.disk_length) == (0, 0):
                runs.append((None, int(extent.length)))
                continue
            if extent.compression or extent.encryption:
                return None
            start = self._physical(int(extent.disk_offset) + int(extent.offset),
                                   int(extent.length))
            if start is None:
                return None
            runs.append((start, int(extent.length)))
        return clip_runs(runs, size, self.size)

    def read_stream(self, node: Node, offset: int, length: int) -> bytes:
        stream = node.open()
        stream.seek(offset)
        return bytes(stream.read(length))

    def _physical(self, logical: int, length: int) -> int | None:
        for chunk in self.fs._logical_fh.chunks:
            if chunk.offset <= logical and logical + length <= chunk.offset + chunk.length:
                profile = int(chunk.type) & int(BTRFS_BLOCK_GROUP_PROFILE_MASK)
                if profile not in (0, int(BTRFS_BLOCK_GROUP.DUP)):
                    return None
                return int(chunk.stripes[0].offset) + logical - int(chunk.offset)
        return None
