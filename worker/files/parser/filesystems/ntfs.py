"""NTFS (dissect.ntfs).

NTFS has no POSIX owner or mode: uid and gid are None, the mode is made up from the type
(0755 for a directory, 0644 for a file, 0444 for a read-only one). A directory lists its
Win32 names (a DOS 8.3 alias is left out) and none of the filesystem's own files (MFT
records below 24: $MFT, $Bitmap, ...). A symlink or junction (a reparse point) is listed
as a symlink with its print name as the target, never followed. Compressed or resident data
has no runs (it is read through Dissect's stream); an EFS-encrypted file is refused."""

from __future__ import annotations

import io
import stat
from collections.abc import Hashable, Iterator
from typing import Any, BinaryIO

from dissect.ntfs import NTFS
from dissect.ntfs.c_ntfs import (
    ATTRIBUTE_FLAG_COMPRESSION_MASK,
    ATTRIBUTE_FLAG_ENCRYPTED,
    ATTRIBUTE_TYPE_CODE,
    FILE_NAME_DOS,
)
from dissect.ntfs.util import segment_reference

from ..errors import Encrypted
from .base import Filesystem, Info, Node, Run, clip_runs

_FIRST_USER_RECORD = 24
_READ_ONLY = 0x1


class Ntfs(Filesystem):
    kind = "ntfs"

    def __init__(self, fh: BinaryIO, size: int) -> None:
        super().__init__(fh, size)
        # Empty $Secure and $UsnJrnl streams: Dissect would look both up by path at once,
        # through an index search that follows a B-tree's child links with no bound (a
        # crafted index pointing at itself hung the open); the parser reads neither.
        self.fs: Any = NTFS(fh, usnjrnl=io.BytesIO(), sds=io.BytesIO())
        self.cluster_size: int = int(self.fs.cluster_size)

    @classmethod
    def probe(cls, fh: BinaryIO, size: int) -> bool:
        fh.seek(3)
        return fh.read(8) == b"NTFS    "

    @property
    def name(self) -> str:
        return "ntfs"

    @property
    def label(self) -> str | None:
        return self.fs.volume_name or None

    def root(self) -> Node:
        return self.fs.mft.root

    def children(self, node: Node) -> Iterator[tuple[str, Node]]:
        for entry in _record(node).index("$I30").entries():
            if entry.attribute is None or entry.attribute.flags == FILE_NAME_DOS:
                continue
            if segment_reference(entry.header.FileReference) < _FIRST_USER_RECORD:
                continue
            yield entry.attribute.file_name, _Lazy(self.fs, entry)

    def lookup(self, node: Node, name: str) -> Node | None:
        # The index's B-tree search folds case the Windows way; a scan keeps "exact match".
        return super().lookup(node, name)

    def identity(self, node: Node) -> Hashable:
        if isinstance(node, _Lazy):
            return int(segment_reference(node.entry.header.FileReference))
        return int(node.segment)

    def info(self, node: Node) -> Info:
        record = _record(node)
        standard = record.attributes[ATTRIBUTE_TYPE_CODE.STANDARD_INFORMATION]
        mtime = int(standard.last_modification_time_ns) if standard else None
        read_only = bool(standard and int(standard.file_attributes) & _READ_ONLY)
        if record.is_reparse_point() and (record.is_symlink() or record.is_mount_point()):
            return Info(type="symlink", size=0, mode=stat.S_IFLNK | 0o777, uid=None, gid=None,
                        mtime_ns=mtime, target=record.reparse_point_name)
        if record.is_dir():
            return Info(type="dir", size=0, mode=stat.S_IFDIR | 0o755, uid=None, gid=None,
                        mtime_ns=mtime)
        size = int(record.size()) if record.has_stream("") else 0
        return Info(type="file", size=size, mode=stat.S_IFREG | (0o444 if read_only else 0o644),
                    uid=None, gid=None, mtime_ns=mtime)

    def runs(self, node: Node) -> list[Run] | None:
        record = _record(node)
        if not record.has_stream(""):
            return []
        attributes = record.attributes.find("", ATTRIBUTE_TYPE_CODE.DATA)
        flags = int(attributes[0].header.flags)
        if flags & ATTRIBUTE_FLAG_ENCRYPTED:
            raise Encrypted("the file is encrypted (NTFS EFS)")
        if attributes[0].header.resident or flags & ATTRIBUTE_FLAG_COMPRESSION_MASK:
            return None
        runs = [(None if lcn is None else lcn * self.cluster_size, count * self.cluster_size)
                for lcn, count in attributes.dataruns()]
        return clip_runs(runs, int(record.size()), self.size)

    def read_stream(self, node: Node, offset: int, length: int) -> bytes:
        record = _record(node)
        if not record.has_stream(""):
            return b""
        stream = record.open()
        stream.seek(offset)
        return bytes(stream.read(length))


class _Lazy:
    """An index entry whose MFT record is read only when asked for (a listing reads the
    records of one page, not of the whole directory)."""

    def __init__(self, fs: Any, entry: Any) -> None:
        self.fs = fs
        self.entry = entry
        self.record: Any = None


def _record(node: Node) -> Any:
    if isinstance(node, _Lazy):
        if node.record is None:
            node.record = node.fs.mft.get(segment_reference(node.entry.header.FileReference))
        return node.record
    return node
