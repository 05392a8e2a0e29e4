"""What every filesystem kind implements: one module per kind (ext.py, xfs.py, ...), listed
only in this package's registry (`__init__.py`), so the operations (ops.py) never ask which
kind they read.

A kind wraps one Dissect module. Its nodes are that module's own objects, opaque to the
operations; names are as Dissect decodes them (ops.py turns them into listed names)."""

from __future__ import annotations

import stat
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar, Literal

from ..errors import ImageReadFailed, Unreadable

Node = Any
"""A kind's own object for one file (Dissect's inode, MFT record, directory entry)."""

Run = tuple[int | None, int]
"""(byte offset in the filesystem or None for a hole, length in bytes)."""

EntryType = Literal["file", "dir", "symlink", "other"]

MAX_LINK_BYTES = 4096
"""PATH_MAX: no symlink's target is longer. Dissect reads a target whole, as many bytes as
the inode says: a crafted size of 4 GiB had the child allocate up to its memory limit and
the listing of the link's directory fail."""


@dataclass(frozen=True)
class Info:
    type: EntryType
    size: int
    mode: int
    uid: int | None
    gid: int | None
    mtime_ns: int | None
    target: str | None = None


def type_of_mode(mode: int) -> EntryType:
    kind = stat.S_IFMT(mode)
    if kind == stat.S_IFREG:
        return "file"
    if kind == stat.S_IFDIR:
        return "dir"
    if kind == stat.S_IFLNK:
        return "symlink"
    return "other"


class Filesystem(ABC):
    kind: ClassVar[str]
    """The registry's name of the kind (its module's name)."""

    def __init__(self, fh: BinaryIO, size: int) -> None:
        self.fh = fh
        self.size = size

    @classmethod
    @abstractmethod
    def probe(cls, fh: BinaryIO, size: int) -> bool:
        """Whether `fh` (a partition's bytes) starts with this kind's superblock: a few
        small reads, never a parse."""

    @property
    @abstractmethod
    def name(self) -> str:
        """What the partition's "filesystem" says: ext2, ext3, ext4, xfs, ntfs, fat32..."""

    @property
    @abstractmethod
    def label(self) -> str | None: ...

    @abstractmethod
    def root(self) -> Node: ...

    @abstractmethod
    def children(self, node: Node) -> Iterator[tuple[str, Node]]:
        """A directory's entries as (name, node), "." and ".." and the filesystem's own
        metadata files left out; nothing read per entry beyond the directory itself."""

    def lookup(self, node: Node, name: str) -> Node | None:
        """The entry `name` of directory `node` (exact match): a kind with an index (a hash,
        a B-tree) may do better than this scan."""
        for child_name, child in self.children(node):
            if child_name == name:
                return child
        return None

    @abstractmethod
    def identity(self, node: Node) -> Hashable:
        """What names one file whichever path reaches it (an inode number): walks use it to
        refuse a directory cycle a crafted filesystem can hold."""

    @abstractmethod
    def info(self, node: Node) -> Info: ...

    @abstractmethod
    def runs(self, node: Node) -> list[Run] | None:
        """Where a regular file's bytes lie in the filesystem, in order, holes as None,
        exactly covering its size; None when they are not plain blocks (inline, resident,
        compressed)."""

    def read(self, node: Node, offset: int, length: int) -> bytes:
        """`length` bytes of a regular file at `offset` (fewer at its end)."""
        runs = self.runs(node)
        if runs is None:
            return self.read_stream(node, offset, length)
        return read_runs(self.fh, runs, offset, length)

    @abstractmethod
    def read_stream(self, node: Node, offset: int, length: int) -> bytes:
        """A read through the kind's own stream (decompressing, inline data)."""


def link_target(node: Any, size: int) -> str | None:
    """A symlink's target (Dissect's `node.link`), None when its size is not one a target
    can have: the link is listed, its target unknown."""
    return node.link if 0 <= size <= MAX_LINK_BYTES else None


def read_runs(fh: BinaryIO, runs: list[Run], offset: int, length: int) -> bytes:
    out = []
    position = 0
    for start, run_length in runs:
        if length <= 0:
            break
        end = position + run_length
        if end > offset:
            skip = max(0, offset - position)
            take = min(run_length - skip, length)
            if start is None:
                out.append(bytes(take))
            else:
                fh.seek(start + skip)
                data = fh.read(take)
                out.append(data + bytes(take - len(data)))
            offset += take
            length -= take
        position = end
    return b"".join(out)


def clip_runs(runs: list[Run], size: int, limit: int) -> list[Run]:
    """Runs cut to exactly `size` bytes (a filesystem maps whole blocks), padded with a hole
    where they fall short, adjacent ones merged; Unreadable where one lies outside the
    filesystem's `limit` bytes (a crafted extent pointing anywhere on the disk)."""
    out: list[Run] = []
    total = 0
    for start, mapped in runs:
        if total >= size:
            break
        if mapped < 0 or (start is not None and start < 0):
            raise Unreadable("a file's block map is damaged")
        length = min(mapped, size - total)
        if length == 0:
            continue
        if start is not None and start + length > limit:
            raise Unreadable("a file's data lies outside its filesystem")
        _append(out, start, length)
        total += length
    if total < size:
        _append(out, None, size - total)
    return out


def _append(out: list[Run], start: int | None, length: int) -> None:
    if out:
        last_start, last_length = out[-1]
        if (last_start is None and start is None) or (
                last_start is not None and start is not None
                and last_start + last_length == start):
            out[-1] = (last_start, last_length + length)
            return
    out.append((start, length))


def guarded(what: str, error: Exception) -> Unreadable:
    """The Unreadable a library's error becomes (the image reader's own failure excepted:
    the caller re-raises ImageReadFailed before coming here)."""
    if isinstance(error, ImageReadFailed):
        raise error
    detail = str(error).splitlines()[0][:120] if str(error) else type(error).__name__
    return Unreadable(f"{what}: {detail}")
