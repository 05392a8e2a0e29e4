"""FAT12, FAT16 and FAT32 (dissect.fat).

FAT has no owner, no POSIX mode and local times without a zone: uid and gid are None, the
mode is made up (0755 directories, 0644 files, 0444 read-only ones), times are taken as UTC.
Names are the long (VFAT) names where there are, else the 8.3 names (code page 437). A
file's cluster chain is followed here, at most as many clusters as the FAT holds: Dissect's
`FAT.chain` follows a chain that loops back on itself for ever."""

from __future__ import annotations

import calendar
import stat
from collections.abc import Hashable, Iterator
from typing import Any, BinaryIO

from dissect.fat import FATFS
from dissect.fat.c_fat import Fattype

from ..errors import Unreadable
from .base import EntryType, Filesystem, Info, Node, Run, clip_runs

_END_OF_CHAIN = 0x0FFFFFF8


class Fat(Filesystem):
    kind = "fat"

    def __init__(self, fh: BinaryIO, size: int) -> None:
        super().__init__(fh, size)
        self.fs: Any = FATFS(fh)
        bpb = self.fs.bpb
        self.cluster_size: int = int(self.fs.cluster_size)
        self.data_offset: int = int(self.fs.first_data_sector) * int(bpb.BPB_BytsPerSec)

    @classmethod
    def probe(cls, fh: BinaryIO, size: int) -> bool:
        fh.seek(0)
        sector = fh.read(512)
        if len(sector) < 512 or sector[510:512] != b"\x55\xaa":
            return False
        jump = sector[0] == 0xE9 or (sector[0] == 0xEB and sector[2] == 0x90)
        # The filesystem type string: what tells a FAT boot sector from an MBR.
        return jump and (sector[82:87] == b"FAT32" or sector[54:57] == b"FAT")

    @property
    def name(self) -> str:
        return {Fattype.FAT12: "fat12", Fattype.FAT16: "fat16"}.get(self.fs.type, "fat32")

    @property
    def label(self) -> str | None:
        label = str(self.fs.volume_label).strip()
        return label if label and label != "NO NAME" else None

    def root(self) -> Node:
        return self.fs.root

    def children(self, node: Node) -> Iterator[tuple[str, Node]]:
        for child in node.iterdir():
            if child.is_volume_id() or child.name in (".", ".."):
                continue
            yield _name(child), child

    def identity(self, node: Node) -> Hashable:
        return node.cluster if node.cluster else ("entry", id(node))

    def info(self, node: Node) -> Info:
        read_only = bool(node.is_readonly())
        kind: EntryType = "dir" if node.is_directory() else "file"
        if kind == "dir":
            mode, size = stat.S_IFDIR | 0o755, 0
        else:
            mode, size = stat.S_IFREG | (0o444 if read_only else 0o644), int(node.size)
        try:
            mtime = calendar.timegm(node.mtime.timetuple()) * 1_000_000_000
        except (ValueError, OverflowError):
            mtime = None
        return Info(type=kind, size=size, mode=mode, uid=None, gid=None,
                    mtime_ns=mtime)

    def runs(self, node: Node) -> list[Run] | None:
        size = int(node.size)
        if size == 0 or node.cluster == 0:
            return clip_runs([], size, self.size)
        clusters = self._chain(int(node.cluster), -(-size // self.cluster_size))
        runs: list[Run] = [
            (self.data_offset + (first - 2) * self.cluster_size, count * self.cluster_size)
            for first, count in clusters]
        return clip_runs(runs, size, self.size)

    def read_stream(self, node: Node, offset: int, length: int) -> bytes:
        stream = node.open()
        stream.seek(offset)
        return bytes(stream.read(length))

    def _chain(self, cluster: int, needed: int) -> list[tuple[int, int]]:
        fat = self.fs.fat
        bits = fat.bits_per_entry
        end = _END_OF_CHAIN & ((1 << bits) - 1)
        runs: list[tuple[int, int]] = []
        for _ in range(fat.entry_count):
            if not 2 <= cluster < fat.entry_count:
                raise Unreadable("a file's cluster chain is damaged")
            if runs and runs[-1][0] + runs[-1][1] == cluster:
                runs[-1] = (runs[-1][0], runs[-1][1] + 1)
            else:
                runs.append((cluster, 1))
            needed -= 1
            following = int(fat.get(cluster))
            if following >= end or needed == 0:
                return runs
            cluster = following
        raise Unreadable("a file's cluster chain loops")


_LOWER_BASE = 0x08
_LOWER_EXTENSION = 0x10


def _name(entry: Any) -> str:
    """The entry's long name, else its 8.3 name in the case Windows and Linux show: a name
    like "readme.txt" gets no long name, only case bits in DIR_NTRes, which Dissect does not
    apply (it would list "README.TXT")."""
    name = str(entry.name)
    if entry.ldirents:
        return name
    case = int(entry.dirent.DIR_NTRes)
    base, dot, extension = name.partition(".")
    if case & _LOWER_BASE:
        base = base.lower()
    if case & _LOWER_EXTENSION:
        extension = extension.lower()
    return base + dot + extension
