"""XFS (dissect.xfs).

A file's block map is read here from Dissect's extent records (`INode._iter_blocks`), not
from `INode.dataruns`: Dissect ignores an extent's unwritten flag (space preallocated by
fallocate, whose blocks still hold whatever was there before) and would return those stale
bytes; here an unwritten extent is a hole, as the kernel reads it."""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterator
from typing import Any, BinaryIO

from dissect.xfs import XFS
from dissect.xfs.c_xfs import c_xfs
from dissect.xfs.xfs import INode

from ..errors import Limit, Unreadable
from .base import Filesystem, Info, Node, Run, clip_runs, link_target, type_of_mode

_MAX_EXTENTS = 1 << 20
_DIRECTORY_DATA_BYTES = 32 << 30
"""XFS_DIR2_LEAF_OFFSET: a directory's entries lie in its first 32 GiB; leaf and free-space
index blocks above."""


class _SizedINode(INode):  # type: ignore[misc]  # Dissect's classes are Any to mypy
    """A directory's inode whose size is `bound`, what Xfs._bounded gives Dissect to list."""

    bound: int

    @property
    def size(self) -> int:
        return min(int(self.inode.di_size), self.bound)



class Xfs(Filesystem):
    kind = "xfs"

    def __init__(self, fh: BinaryIO, size: int) -> None:
        super().__init__(fh, size)
        self.fs: Any = XFS(fh)
        self.block_size: int = int(self.fs.block_size)

    @classmethod
    def probe(cls, fh: BinaryIO, size: int) -> bool:
        fh.seek(0)
        return fh.read(4) == b"XFSB"

    @property
    def name(self) -> str:
        return "xfs"

    @property
    def label(self) -> str | None:
        return self.fs.name or None

    def root(self) -> Node:
        return self.fs.root

    def children(self, node: Node) -> Iterator[tuple[str, Node]]:
        for child in self._bounded(node).iterdir():
            if child.filename not in (".", ".."):
                yield child.filename, child

    def identity(self, node: Node) -> Hashable:
        return int(node.inum)

    def info(self, node: Node) -> Info:
        inode = node.inode
        mode = int(inode.di_mode)
        kind = type_of_mode(mode)
        return Info(type=kind, size=int(node.size), mode=mode, uid=int(inode.di_uid),
                    gid=int(inode.di_gid), mtime_ns=int(node.mtime_ns),
                    target=link_target(node, int(node.size)) if kind == "symlink" else None)

    def runs(self, node: Node) -> list[Run] | None:
        if node.inode.di_format not in (c_xfs.xfs_dinode_fmt.XFS_DINODE_FMT_EXTENTS,
                                        c_xfs.xfs_dinode_fmt.XFS_DINODE_FMT_BTREE):
            return None
        sb = self.fs.sb
        extents = []
        for logical, block, count, unwritten in node._iter_blocks():
            extents.append((int(logical), int(block), int(count), bool(unwritten)))
            if len(extents) > _MAX_EXTENTS:
                raise Limit(f"a file has more than {_MAX_EXTENTS} extents")
        extents.sort()
        runs: list[Run] = []
        position = 0
        for logical, block, count, unwritten in extents:
            if logical < position:
                raise Unreadable("a file's extents overlap")
            if logical > position:
                runs.append((None, (logical - position) * self.block_size))
            group, in_group = block >> sb.sb_agblklog, block & ((1 << sb.sb_agblklog) - 1)
            start = (group * sb.sb_agblocks + in_group) * self.block_size
            runs.append((None if unwritten else start, count * self.block_size))
            position = logical + count
        return clip_runs(runs, int(node.size), self.size)

    def _bounded(self, directory: Node) -> Node:
        """The directory as Dissect lists it, its size cut to the end of its last mapped
        block: Dissect visits every block its size spans, holes too, one by one (a crafted
        size of 2^63 listed for ever, until the call's deadline)."""
        if directory.inode.di_format not in (c_xfs.xfs_dinode_fmt.XFS_DINODE_FMT_EXTENTS,
                                             c_xfs.xfs_dinode_fmt.XFS_DINODE_FMT_BTREE):
            return directory
        data_blocks = _DIRECTORY_DATA_BYTES // self.block_size
        end = 0
        for count, (logical, _, length, _) in enumerate(directory._iter_blocks()):
            if count > _MAX_EXTENTS:
                raise Limit(f"a directory has more than {_MAX_EXTENTS} extents")
            end = max(end, min(int(logical) + int(length), data_blocks))
        if int(directory.size) <= end * self.block_size:
            return directory
        bounded = copy.copy(directory)
        bounded.__class__ = _SizedINode
        bounded.bound = end * self.block_size
        return bounded

    def read_stream(self, node: Node, offset: int, length: int) -> bytes:
        stream = node.open()
        stream.seek(offset)
        return bytes(stream.read(length))
