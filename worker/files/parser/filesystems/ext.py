"""ext2, ext3 and ext4 (dissect.extfs).

Where Dissect is not used, and why:
- A file's block map (`runs`) is parsed here from the inode's extent tree, bounded (depth,
  entries per node, total extents): Dissect's `INode.dataruns` misplaces an unwritten
  (preallocated) extent that follows a hole (it skips the gap before it, shifting every later
  byte) and reads an ext2/3 file's trailing hole as block 0. Reads go through these runs too.
- A directory is read with `INode.iterdir` (its blocks in order, a rec_len of 0 ends it);
  only the inodes of entries the caller looks at are read."""

from __future__ import annotations

import stat
import struct
from collections.abc import Hashable, Iterator
from typing import Any, BinaryIO

from dissect.extfs import ExtFS
from dissect.extfs.c_ext import EXT2, EXT3, EXT4, c_ext

from ..errors import Encrypted, Limit, Unreadable
from .base import Filesystem, Info, Node, Run, clip_runs, link_target, type_of_mode

_SUPERBLOCK = 1024
_MAGIC_AT = _SUPERBLOCK + 0x38
_EXTENT_MAGIC = 0xF30A
_MAX_DEPTH = 5
_MAX_EXTENTS = 1 << 20
_UNWRITTEN = 0x8000
_HEADER = struct.Struct("<HHHHI")
_LEAF = struct.Struct("<IHHI")
_INDEX = struct.Struct("<IIHH")


class Ext(Filesystem):
    kind = "ext"

    def __init__(self, fh: BinaryIO, size: int) -> None:
        super().__init__(fh, size)
        self.fs: Any = ExtFS(fh)
        self.block_size: int = self.fs.block_size

    @classmethod
    def probe(cls, fh: BinaryIO, size: int) -> bool:
        fh.seek(_MAGIC_AT)
        return fh.read(2) == b"\x53\xef"

    @property
    def name(self) -> str:
        return {EXT2: "ext2", EXT3: "ext3", EXT4: "ext4"}[self.fs.type]

    @property
    def label(self) -> str | None:
        return self.fs.volume_name or None

    def root(self) -> Node:
        return self.fs.root

    def children(self, node: Node) -> Iterator[tuple[str, Node]]:
        inode = node.inode
        if not int(inode.i_flags) & (c_ext.EXT4_EXTENTS_FL | c_ext.EXT4_INLINE_DATA_FL):
            # Dissect reads the directory through its own block map unless given one.
            node._runlist = self._indirect_runs(node)
        for child in node.iterdir():
            if child.filename not in (".", ".."):
                yield child.filename, child

    def identity(self, node: Node) -> Hashable:
        return int(node.inum)

    def info(self, node: Node) -> Info:
        inode = node.inode
        mode = int(inode.i_mode)
        kind = type_of_mode(mode)
        return Info(
            type=kind, size=int(node.size), mode=mode,
            uid=int(inode.i_uid) | int(inode.i_uid_high) << 16,
            gid=int(inode.i_gid) | int(inode.i_gid_high) << 16,
            mtime_ns=int(node.mtime_ns),
            target=link_target(node, int(node.size)) if kind == "symlink" else None)

    def runs(self, node: Node) -> list[Run] | None:
        inode = node.inode
        flags = int(inode.i_flags)
        if flags & c_ext.EXT4_ENCRYPT_FL and stat.S_ISREG(int(inode.i_mode)):
            raise Encrypted("the file is encrypted (ext4 encryption)")
        if flags & c_ext.EXT4_INLINE_DATA_FL:
            return None
        size = int(node.size)
        if flags & c_ext.EXT4_EXTENTS_FL:
            blocks = self._extent_runs(bytes(inode.i_block))
        else:
            blocks = self._indirect_runs(node)
        runs = [(None if start is None else start * self.block_size, length * self.block_size)
                for start, length in blocks]
        return clip_runs(runs, size, self.size)

    def read_stream(self, node: Node, offset: int, length: int) -> bytes:
        stream = node.open()
        stream.seek(offset)
        return bytes(stream.read(length))

    def _indirect_runs(self, node: Node) -> list[Run]:
        """An ext2/3 block map (12 direct pointers, then single, double and triple indirect
        blocks) as runs of blocks, a hole for a pointer of 0 at any level. Not Dissect's
        `dataruns`: it lists every block of the file, holes too, before merging them (a
        crafted size of 2^40 filled the child's memory). Here a hole costs nothing, and a
        map naming more blocks than the filesystem has is refused."""
        per = self.block_size // 4
        left = -(-int(node.size) // self.block_size)
        pointers = struct.unpack_from("<15I", bytes(node.inode.i_block))
        runs: list[Run] = []
        mapped = 0

        def add(start: int | None, count: int) -> None:
            nonlocal mapped
            if start is not None:
                mapped += count
                if mapped > self.fs.block_count:
                    raise Unreadable("a file's block map names more blocks than its "
                                     "filesystem has")
            last = runs[-1] if runs else None
            if last is not None and (
                    (start is None and last[0] is None)
                    or (start is not None and last[0] is not None
                        and last[0] + last[1] == start)):
                runs[-1] = (last[0], last[1] + count)
                return
            runs.append((start, count))
            if len(runs) > _MAX_EXTENTS:
                raise Limit(f"a file has more than {_MAX_EXTENTS} runs of blocks")

        def walk(pointer: int, level: int, wanted: int) -> int:
            take: int = min(int(per ** level), wanted)
            if pointer == 0 or level == 0:
                add(None if pointer == 0 else pointer, take)
                return take
            if (pointer + 1) * self.block_size > self.size:
                raise Unreadable("a file's block map points outside its filesystem")
            self.fh.seek(pointer * self.block_size)
            data = self.fh.read(self.block_size).ljust(self.block_size, b"\0")
            covered = 0
            for child in struct.unpack(f"<{per}I", data):
                if covered >= take:
                    break
                covered += walk(child, level - 1, take - covered)
            return covered

        for index, pointer in enumerate(pointers):
            if left <= 0:
                break
            left -= walk(pointer, max(0, index - 11), left)
        if left > 0:  # past what a triple indirect block maps: nothing is there
            add(None, left)
        return runs

    def _extent_runs(self, root: bytes) -> list[Run]:
        extents: list[tuple[int, int, int, bool]] = []
        self._walk_extents(root, None, extents)
        extents.sort()
        runs: list[Run] = []
        position = 0
        for logical, length, physical, unwritten in extents:
            if logical < position:
                raise Unreadable("a file's extents overlap")
            if logical > position:
                runs.append((None, logical - position))
            runs.append((None if unwritten else physical, length))
            position = logical + length
        return runs

    def _walk_extents(self, node: bytes, depth: int | None,
                      out: list[tuple[int, int, int, bool]]) -> None:
        magic, entries, _, node_depth, _ = _HEADER.unpack_from(node)
        if magic != _EXTENT_MAGIC or node_depth > _MAX_DEPTH or (
                depth is not None and node_depth != depth):
            raise Unreadable("a file's extent tree is damaged")
        if 12 + entries * 12 > len(node):
            raise Unreadable("a file's extent tree is damaged")
        for i in range(entries):
            at = 12 + i * 12
            if node_depth == 0:
                logical, length, start_hi, start_lo = _LEAF.unpack_from(node, at)
                unwritten = length > _UNWRITTEN
                if unwritten:
                    length -= _UNWRITTEN
                out.append((logical, length, start_hi << 32 | start_lo, unwritten))
                if len(out) > _MAX_EXTENTS:
                    raise Limit(f"a file has more than {_MAX_EXTENTS} extents")
            else:
                _, leaf_lo, leaf_hi, _ = _INDEX.unpack_from(node, at)
                child = (leaf_hi << 32 | leaf_lo) * self.block_size
                if child + self.block_size > self.size:
                    raise Unreadable("a file's extent tree points outside its filesystem")
                self.fh.seek(child)
                self._walk_extents(self.fh.read(self.block_size), node_depth - 1, out)


