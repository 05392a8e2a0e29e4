"""The file-level restore's fuzz (issue 34): real images (tests/support/fs_images.py) with
their metadata mutated, each read through a real ParserSession (the sealed child, forked by
the zygote, the production limits) as a tenant would, every call checked: it ends within
its deadline, with a value of the right shape or one of the tenant's errors (a 4xx), and
the child's memory stays under its limit.

Where the metadata lies is read off each base image once (`metadata`): superblocks, group
descriptors, inodes and directory blocks of ext4 (Dissect's ExtFS locates them); XFS's
superblock, AG headers, inodes and directory blocks; NTFS's boot sector, MFT records and
index blocks; FAT32's boot sectors, FAT and directory clusters; Btrfs's superblock and
every tree node (found by its fsid); a GPT's protective MBR, header and entries; an MBR's
table and its EBR chain (a disk's partitions' own metadata as well).

A case is a seed: `mutate(target, seed)` picks one to three mutations of those regions
(bits flipped; a field or byte set to a boundary value: 0, 0x7F, 0x80, 0xFF, 0x7FFFFFFF,
0x80000000, 0xFFFFFFFF...; one region copied over another of its kind, which makes a
directory hold itself or an inode another's; sizes and extent lengths made huge; a name
made giant; a symlink pointing at itself; an NTFS $DATA attribute flagged compressed,
encrypted or sparse). The image file is never copied: the mutations are patches laid over
its bytes as they are read (PatchedReader), and `write_case` writes one out to replay by hand.

    PYTHONPATH=$PWD python -m tests.support.fs_fuzz --cases 1000 --seed 7 [--kinds ext4,xfs]

is what `make fuzz-files` runs; tests/tools/worker/files/test_fuzz.py runs a few cases per
kind. A failing case prints its kind, seed and mutations and how to replay it
(`--kinds KIND --replay SEED`)."""

from __future__ import annotations

import argparse
import hashlib
import io
import random
import shutil
import struct
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.errors import (
    CairnError,
    FilesEncrypted,
    FilesUnreadable,
    IsADirectory,
    NotADirectory,
    ParserLimitExceeded,
    PathNotFound,
)
from tests.support import fs_images
from tests.support.file_reader import FileReader
from tests.support.fs_images import Image
from worker.files.sandbox import Child, ChildConfig
from worker.files.session import ParserLimits, ParserSession
from worker.files.zygote import start_child

KINDS = ("ext4", "xfs", "ntfs", "fat32", "btrfs", "gpt", "mbr")
TENANT_ERRORS: tuple[type[CairnError], ...] = (
    PathNotFound, FilesUnreadable, FilesEncrypted, NotADirectory, IsADirectory,
    ParserLimitExceeded)
"""What a call may end in besides a value: the 4xx classes of services.errors."""
PRODUCTION = ParserLimits()
"""The limits the file service runs its parser children with."""
MARGIN_SECONDS = 2.0
"""A call's time past its deadline that is still "in time": a child's fork and READY and
the parent's kill and reap (the loaded test host's share of a second or so)."""
TIMEOUTS_PER_CASE = 2
"""A case whose calls ran into the deadline this often stops (each costs 10-20 s)."""

SECTOR = 512
BOUNDARIES: dict[int, tuple[int, ...]] = {
    1: (0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE),
    2: (0x0000, 0xFFFF, 0x7FFF, 0x8000, 0x0001, 0xFFFE),
    4: (0x00000000, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x00000001, 0xFFFFFFFE),
    8: (0, (1 << 64) - 1, (1 << 63) - 1, 1 << 63, 1, 0xFFFFFFFF),
}


# --- where the metadata lies -----------------------------------------------------------

@dataclass(frozen=True)
class Region:
    """Bytes of an image holding metadata of one kind (`tag`), with the fields known in it:
    (offset in the region, width in bytes, little-endian unless `big`)."""

    tag: str
    offset: int
    length: int
    fields: tuple[tuple[int, int], ...] = ()
    note: str = ""
    big: bool = False

    def shifted(self, by: int) -> Region:
        return Region(self.tag, self.offset + by, self.length, self.fields, self.note,
                      self.big)


@dataclass(frozen=True)
class Target:
    """A base image and its metadata regions."""

    kind: str
    image: Image
    size: int
    regions: tuple[Region, ...]

    def tagged(self, *tags: str) -> list[Region]:
        return [region for region in self.regions if region.tag in tags]


def metadata(kind: str, image: Image) -> Target:
    size = image.path.stat().st_size
    with image.path.open("rb") as fh:
        regions = FINDERS[kind](fh, image) if kind in FINDERS else _disk_regions(fh, image)
    if not regions:
        raise AssertionError(f"no metadata found in the {kind} image")
    return Target(kind, image, size, tuple(sorted(regions, key=lambda r: r.offset)))


def _ext4(fh: Any, image: Image) -> list[Region]:
    from dissect.extfs import ExtFS

    fs = ExtFS(fh)
    block = fs.block_size
    sb = Region("superblock", 1024, 1024, (
        (0x00, 4), (0x04, 4), (0x14, 4), (0x18, 4), (0x20, 4), (0x28, 4), (0x38, 2),
        (0x4C, 4), (0x54, 4), (0x58, 2), (0x5C, 4), (0x60, 4), (0x64, 4), (0xFE, 2),
        (0x150, 4), (0x175, 1)))
    regions = [sb, Region("group-descriptors", fs.groups_offset,
                          fs.groups_count * fs._group_desc_size,
                          tuple((i * fs._group_desc_size + at, width)
                                for i in range(min(fs.groups_count, 4))
                                for at, width in ((0, 4), (4, 4), (8, 4), (12, 2), (14, 2),
                                                  (16, 2))))]
    inode_fields = ((0x00, 2), (0x04, 4), (0x1A, 2), (0x20, 4), (0x28, 2), (0x2A, 2),
                    (0x2C, 2), (0x2E, 2), (0x34, 4), (0x38, 2), (0x3A, 2), (0x3C, 4),
                    (0x40, 4), (0x44, 2), (0x4C, 4), (0x6C, 4))

    def inode_at(node: Any) -> int:
        group, index = divmod(node.inum - 1, fs.sb.s_inodes_per_group)
        desc = fs._read_group_desc(group)
        table = desc.bg_inode_table_lo | (getattr(desc, "bg_inode_table_hi", 0) << 32)
        return int(table * block + index * fs.sb.s_inode_size)

    for path, node in _walk(fs.root, lambda n: [
            (c.filename, c) for c in n.iterdir() if c.filename not in (".", "..")],
            lambda n: n.filetype == 0o040000):
        tag = {0o040000: "inode-dir", 0o120000: "inode-symlink"}.get(node.filetype, "inode")
        regions.append(Region(tag, inode_at(node), int(fs.sb.s_inode_size), inode_fields,
                              path))
        if node.filetype == 0o040000:
            for start, count in node.dataruns():
                if start:
                    dirents = _ext4_dirents(fh, start * block, count * block)
                    regions.append(Region("directory", start * block, count * block,
                                          dirents, path))
    return regions


def _ext4_dirents(fh: Any, offset: int, length: int) -> tuple[tuple[int, int], ...]:
    """Each entry's inode, rec_len, name_len and file_type: what a crafted directory lies in."""
    fh.seek(offset)
    data = fh.read(length)
    fields: list[tuple[int, int]] = []
    at = 0
    while at + 8 <= len(data) and len(fields) < 256:
        rec_len = struct.unpack_from("<H", data, at + 4)[0]
        fields += [(at, 4), (at + 4, 2), (at + 6, 1), (at + 7, 1)]
        if rec_len < 8:
            break
        at += rec_len
    return tuple(fields)


def _xfs(fh: Any, image: Image) -> list[Region]:
    from dissect.xfs import XFS

    fs = XFS(fh)
    sb = fs.sb
    sect = int(sb.sb_sectsize)
    regions = [
        Region("superblock", 0, sect, tuple((at, w) for at, w in (
            (4, 4), (8, 8), (0x38, 8), (0x54, 4), (0x58, 4), (0x5C, 4), (0x64, 2), (0x66, 2),
            (0x68, 2), (0x6A, 2), (0x78, 1), (0x79, 1), (0x7A, 1), (0x7B, 1), (0x7C, 1),
            (0xC0, 1), (0xD0, 4), (0xD8, 4))), big=True),
        Region("ag-header", sect, sect, ((4, 4), (8, 4), (16, 4), (20, 4)), "agf", big=True),
        Region("ag-header", 2 * sect, sect, ((4, 4), (8, 4), (12, 4), (16, 4), (20, 4),
                                             (24, 4), (28, 4)), "agi", big=True),
        Region("ag-header", 3 * sect, sect, note="agfl", big=True),
    ]
    inode_size = int(sb.sb_inodesize)
    inode_fields = ((0, 2), (2, 2), (4, 1), (5, 1), (8, 4), (12, 4), (16, 4), (0x38, 8),
                    (0x40, 8), (0x4C, 4), (0x50, 1), (0x52, 1), (0x58, 8))

    def blocks(node: Any) -> Iterator[tuple[int, int]]:
        for start, count in node.dataruns:  # a property in dissect.xfs
            if start is not None:
                yield start * fs.block_size, count * fs.block_size

    for path, node in _walk(fs.root, lambda n: [
            (c.filename, c) for c in n.iterdir() if c.filename not in (".", "..")],
            lambda n: n.filetype == 0o040000):
        at = node.ag.num * fs._ag_size + node.relative_inum * inode_size
        tag = {0o040000: "inode-dir", 0o120000: "inode-symlink"}.get(node.filetype, "inode")
        regions.append(Region(tag, at, inode_size, inode_fields, path, big=True))
        if node.filetype == 0o040000 and node.inode.di_format != 1:
            regions += [Region("directory", start, length, note=path, big=True)
                        for start, length in blocks(node)]
    return regions


def _ntfs(fh: Any, image: Image) -> list[Region]:
    from dissect.ntfs import NTFS

    fs = NTFS(fh)
    record = fs._record_size
    mft = fs.boot_sector.MftStartLcn * fs.cluster_size
    regions = [Region("boot-sector", 0, SECTOR, (
        (0x0B, 2), (0x0D, 1), (0x0E, 2), (0x28, 8), (0x30, 8), (0x38, 8), (0x40, 1),
        (0x44, 1)))]
    fh.seek(mft)
    table = fh.read(64 * record)
    for number in range(64):
        at = number * record
        if table[at:at + 4] != b"FILE":
            continue
        regions.append(Region("mft-record", mft + at, record,
                              _ntfs_attributes(table[at:at + record]), f"record {number}"))
    size = image.path.stat().st_size
    for at in range(0, size, 4096):
        fh.seek(at)
        if fh.read(4) == b"INDX":
            regions.append(Region("index-block", at, fs._index_size,
                                  ((4, 2), (6, 2), (0x18, 4), (0x1C, 4), (0x20, 4))))
    return regions


def _ntfs_attributes(data: bytes) -> tuple[tuple[int, int], ...]:
    """The record's header fields and each attribute's type, length, flags and, for a
    non-resident one, its run list offset, compression unit and sizes."""
    fields: list[tuple[int, int]] = [(4, 2), (6, 2), (0x10, 2), (0x12, 2), (0x14, 2),
                                     (0x16, 2), (0x18, 4), (0x1C, 4)]
    at = struct.unpack_from("<H", data, 0x14)[0]
    for _ in range(32):
        if at + 16 > len(data):
            break
        kind, length = struct.unpack_from("<II", data, at)
        if kind == 0xFFFFFFFF or length < 16:
            break
        fields += [(at, 4), (at + 4, 4), (at + 8, 1), (at + 9, 1), (at + 0x0A, 2),
                   (at + 0x0C, 2)]
        if data[at + 8]:  # non-resident
            fields += [(at + 0x10, 8), (at + 0x18, 8), (at + 0x20, 2), (at + 0x22, 1),
                       (at + 0x28, 8), (at + 0x30, 8), (at + 0x38, 8)]
        else:
            fields += [(at + 0x10, 4), (at + 0x14, 2)]
        at += length
    return tuple(fields)


def _fat32(fh: Any, image: Image) -> list[Region]:
    from dissect.fat import FATFS

    fs = FATFS(fh)
    bpb = fs.bpb
    sector = int(bpb.BPB_BytsPerSec)
    boot_fields = ((0x0B, 2), (0x0D, 1), (0x0E, 2), (0x10, 1), (0x11, 2), (0x13, 2),
                   (0x16, 2), (0x20, 4), (0x24, 4), (0x2C, 4), (0x30, 2), (0x32, 2))
    regions = [Region("boot-sector", 0, SECTOR, boot_fields),
               Region("boot-sector", SECTOR, SECTOR, ((0, 4), (0x1E4, 4), (0x1E8, 4),
                                                      (0x1EC, 4)), "fsinfo"),
               Region("boot-sector", 6 * SECTOR, SECTOR, boot_fields, "backup")]
    fat = int(bpb.BPB_RsvdSecCnt) * sector
    data = int(fs.first_data_sector) * sector
    cluster = int(fs.cluster_size)
    used = 2
    dirs: list[tuple[str, int]] = []
    for path, node in _walk(fs.root, lambda n: [
            (c.name, c) for c in n.iterdir() if c.name not in (".", "..")
            and not c.is_volume_id()], lambda n: n.is_directory()):
        first = int(node.cluster) if path != "/" else int(fs.bpb_ext.BPB_RootClus)
        used = max(used, first + max(1, -(-int(node.size) // cluster)))
        if path == "/" or node.is_directory():
            dirs.append((path, first))
    fat_bytes = min(int(fs.fat_size) * sector, (used + 16) * 4)
    for copy in range(int(bpb.BPB_NumFATs)):
        at = fat + copy * int(fs.fat_size) * sector
        regions.append(Region("fat", at, fat_bytes, tuple((i * 4, 4) for i in range(
            fat_bytes // 4)), f"FAT {copy + 1}"))
    for path, first in dirs:
        at = data + (first - 2) * cluster
        fh.seek(at)
        entries = fh.read(cluster)
        fields = tuple((i + at_field, width) for i in range(0, len(entries), 32)
                       if entries[i] not in (0, 0xE5)
                       for at_field, width in ((0, 1), (11, 1), (12, 1), (20, 2), (26, 2),
                                               (28, 4)))
        regions.append(Region("directory", at, cluster, fields, path))
    return regions


def _btrfs(fh: Any, image: Image) -> list[Region]:
    fh.seek(0x10000)
    superblock = fh.read(4096)
    fsid = superblock[0x20:0x30]
    nodesize = struct.unpack_from("<I", superblock, 0x94)[0]
    regions = [Region("superblock", 0x10000, 4096, (
        (0x30, 8), (0x40, 8), (0x48, 8), (0x50, 8), (0x58, 8), (0x60, 8), (0x70, 8),
        (0x80, 8), (0x88, 8), (0x90, 4), (0x94, 4), (0x98, 4), (0xA0, 4), (0xC4, 1),
        (0xC5, 1), (0xC6, 1)), "primary")]
    size = image.path.stat().st_size
    step = 4096
    for at in range(0, size - nodesize, step):
        fh.seek(at + 0x20)
        if fh.read(16) != fsid or at == 0x10000:
            continue
        fh.seek(at)
        node = fh.read(nodesize)
        items = struct.unpack_from("<I", node, 0x60)[0]
        level = node[0x64]
        if level > 8 or items > nodesize // 17:
            continue
        fields: list[tuple[int, int]] = [(0x30, 8), (0x50, 8), (0x58, 8), (0x60, 4),
                                         (0x64, 1)]
        width = 33 if level else 25
        for i in range(min(items, 64)):
            item = 0x65 + i * width
            fields += [(item, 8), (item + 8, 1), (item + 9, 8)]
            if level == 0:
                fields += [(item + 17, 4), (item + 21, 4)]
            else:
                fields += [(item + 17, 8)]
        regions.append(Region("tree-node", at, nodesize, tuple(fields),
                              f"level {level}, {items} items"))
    return regions


def _disk_regions(fh: Any, image: Image) -> list[Region]:
    """A disk's table (GPT or MBR with its EBR chain), and its partitions' own metadata."""
    fh.seek(0)
    head = fh.read(34 * SECTOR)
    entries = tuple((446 + 16 * i + at, width) for i in range(4)
                    for at, width in ((0, 1), (4, 1), (8, 4), (12, 4)))
    regions = [Region("partition-table", 0, SECTOR, entries, "MBR")]
    if head[SECTOR:SECTOR + 8] == b"EFI PART":
        regions.append(Region("partition-table", SECTOR, 92, (
            (8, 4), (12, 4), (16, 4), (24, 8), (32, 8), (40, 8), (48, 8), (72, 8), (80, 4),
            (84, 4), (88, 4)), "GPT header"))
        regions.append(Region("partition-table", 2 * SECTOR, 4 * 128, tuple(
            (128 * i + at, width) for i in range(4)
            for at, width in ((0, 8), (32, 8), (40, 8), (48, 8), (56, 2))), "GPT entries"))
        size = image.path.stat().st_size
        regions.append(Region("partition-table", size - SECTOR, 92, note="GPT backup"))
    else:
        extended = next((struct.unpack_from("<I", head, 446 + 16 * i + 8)[0]
                         for i in range(4) if head[446 + 16 * i + 4] in (0x05, 0x0F, 0x85)),
                        None)
        at = extended
        for _ in range(16):
            if at is None:
                break
            regions.append(Region("partition-table", at * SECTOR, SECTOR, entries, "EBR"))
            fh.seek(at * SECTOR + 446 + 16)
            following = fh.read(16)
            relative = struct.unpack_from("<I", following, 8)[0]
            at = extended + relative if relative and extended is not None else None
    for offset, _, filesystem in image.partitions:
        member = Image(image.path, image.tree, filesystem)
        window = _Window(fh, offset)
        regions += [region.shifted(offset) for region in FINDERS[filesystem](window, member)
                    if region.tag in ("superblock", "boot-sector", "directory", "inode-dir",
                                      "mft-record", "fat", "group-descriptors")]
    return regions


class _Window(io.RawIOBase):
    """A partition of a disk image read as if it were the whole file."""

    def __init__(self, fh: Any, offset: int) -> None:
        super().__init__()
        self.fh = fh
        self.offset = offset
        self.position = 0

    def seek(self, position: int, whence: int = io.SEEK_SET) -> int:
        self.position = position + (self.position if whence == io.SEEK_CUR else 0)
        return self.position

    def tell(self) -> int:
        return self.position

    def read(self, length: int | None = -1) -> bytes:
        self.fh.seek(self.offset + self.position)
        data: bytes = self.fh.read(length)
        self.position += len(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True


def _walk(root: Any, children: Callable[[Any], list[tuple[str, Any]]],
          is_dir: Callable[[Any], bool]) -> Iterator[tuple[str, Any]]:
    """The base image's tree (it is sound: made by the tools), parents first."""
    stack = [("/", root)]
    while stack:
        path, node = stack.pop()
        yield path, node
        if is_dir(node):
            for name, child in children(node):
                child_path = path.rstrip("/") + "/" + name
                if is_dir(child):
                    stack.append((child_path, child))
                else:
                    yield child_path, child


FINDERS: dict[str, Callable[[Any, Image], list[Region]]] = {
    "ext4": _ext4, "xfs": _xfs, "ntfs": _ntfs, "fat32": _fat32, "btrfs": _btrfs}


# --- mutations -------------------------------------------------------------------------

@dataclass(frozen=True)
class Patch:
    offset: int
    data: bytes
    what: str
    xor: bool = False
    """The data is XORed onto the image's bytes (flipping bits) rather than replacing them."""


def mutate(target: Target, seed: int) -> list[Patch]:
    """One to three mutations of `target`'s metadata, the same for the same seed."""
    rng = random.Random(f"{target.kind}:{seed}")
    patches: list[Patch] = []
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        operator = rng.choices(OPERATORS, weights=[weight for _, weight in OPERATORS])[0][0]
        patches += operator(rng, target)
    return patches


def _field_value(rng: random.Random, width: int) -> int:
    if rng.random() < 0.8:
        return rng.choice(BOUNDARIES[width])
    return rng.getrandbits(8 * width)


def _pack(value: int, width: int, big: bool) -> bytes:
    return value.to_bytes(width, "big" if big else "little")


def _region(rng: random.Random, target: Target, *tags: str) -> Region:
    candidates = target.tagged(*tags) if tags else []
    return rng.choice(candidates or list(target.regions))


def flip_bits(rng: random.Random, target: Target) -> list[Patch]:
    region = _region(rng, target)
    patches = []
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(region.length)
        bit = rng.randrange(8)
        patches.append(Patch(region.offset + at, bytes([1 << bit]),
                             f"flip bit {bit} of {region.tag}{_note(region)} +{at:#x}",
                             xor=True))
    return patches


def set_field(rng: random.Random, target: Target) -> list[Patch]:
    region = _region(rng, target)
    if region.fields and rng.random() < 0.8:
        at, width = rng.choice(region.fields)
    else:
        width = rng.choice((1, 2, 4, 8))
        at = rng.randrange(0, max(1, region.length - width + 1), width)
    if at + width > region.length:
        width = 1
    value = _field_value(rng, width)
    return [Patch(region.offset + at, _pack(value, width, region.big),
                  f"set {region.tag}{_note(region)} +{at:#x} ({width} B) to {value:#x}")]


def set_bytes(rng: random.Random, target: Target) -> list[Patch]:
    region = _region(rng, target)
    at = rng.randrange(region.length)
    length = min(region.length - at, rng.choice((1, 4, 16, 64, 512)))
    byte = rng.choice((0x00, 0xFF, 0x7F, 0x80))
    return [Patch(region.offset + at, bytes([byte]) * length,
                  f"fill {region.tag}{_note(region)} +{at:#x} ({length} B) with {byte:#04x}")]


def copy_region(rng: random.Random, target: Target) -> list[Patch]:
    """One region's bytes over another of its kind: a parent directory's block over its
    child's (the child lists itself: a cycle), an inode over another (two names, one
    inode; a directory that is its own parent), a tree node over another."""
    region = _region(rng, target, "directory", "inode-dir", "inode", "tree-node",
                     "mft-record", "index-block", "group-descriptors", "fat")
    same = [r for r in target.regions if r.tag == region.tag and r != region]
    if not same:
        return []
    source = rng.choice(same)
    with target.image.path.open("rb") as fh:
        fh.seek(source.offset)
        data = fh.read(min(source.length, region.length))
    return [Patch(region.offset, data, f"copy {source.tag}{_note(source)} over "
                                        f"{region.tag}{_note(region)}")]


def huge_lengths(rng: random.Random, target: Target) -> list[Patch]:
    """Every known field of one region of inodes, records or nodes set to a huge value:
    sizes, extent lengths and counts, block numbers."""
    region = _region(rng, target, "inode", "inode-dir", "inode-symlink", "mft-record",
                     "tree-node", "directory", "partition-table")
    if not region.fields:
        return []
    chosen = rng.sample(region.fields, min(len(region.fields), rng.randint(2, 6)))
    return [Patch(region.offset + at, _pack(rng.choice(BOUNDARIES[width][1:4]), width,
                                            region.big),
                  f"huge {region.tag}{_note(region)} +{at:#x} ({width} B)")
            for at, width in chosen if at + width <= region.length]


def giant_name(rng: random.Random, target: Target) -> list[Patch]:
    """A directory entry's name length at its maximum, its name bytes made 0xFF or '/'."""
    if target.kind == "ext4":
        region = _region(rng, target, "directory")
        lengths = [(at, w) for at, w in region.fields if w == 1][::2]  # name_len, not type
        if lengths:
            at = rng.choice(lengths)[0]
            return [Patch(region.offset + at, b"\xff", f"name_len 255 in {region.tag}"
                                                        f"{_note(region)} +{at:#x}"),
                    Patch(region.offset + at + 2, rng.choice((b"/", b"\x00", b"\xff")) * 64,
                          "name bytes")]
    region = _region(rng, target, "directory", "index-block", "tree-node", "inode-dir")
    at = rng.randrange(region.length)
    return [Patch(region.offset + at, rng.choice((b"\xff", b"/", b"\x00")) * min(
        255, region.length - at), f"name bytes in {region.tag}{_note(region)} +{at:#x}")]


def ntfs_flags(rng: random.Random, target: Target) -> list[Patch]:
    """A file's $DATA attribute flagged compressed (a zip-bomb-like stream), encrypted or
    sparse, its compression unit set."""
    records = [r for r in target.tagged("mft-record") if r.note.startswith("record")
               and int(r.note.split()[1]) >= 24]
    if not records:
        return set_field(rng, target)
    region = rng.choice(records)
    with target.image.path.open("rb") as fh:
        fh.seek(region.offset)
        data = fh.read(region.length)
    at = struct.unpack_from("<H", data, 0x14)[0]
    for _ in range(32):
        if at + 16 > len(data):
            break
        kind, length = struct.unpack_from("<II", data, at)
        if kind == 0xFFFFFFFF or length < 16:
            break
        if kind == 0x80:
            flags = rng.choice((0x0001, 0x00FF, 0x4000, 0x8000, 0x8001, 0xFFFF))
            patches = [Patch(region.offset + at + 0x0C, _pack(flags, 2, False),
                             f"$DATA flags {flags:#06x} in {region.note}")]
            if data[at + 8]:
                unit = rng.choice((0, 4, 16, 255))
                patches.append(Patch(region.offset + at + 0x22, bytes([unit]),
                                     f"compression unit {unit}"))
            return patches
        at += length
    return set_field(rng, target)


def symlink_loop(rng: random.Random, target: Target) -> list[Patch]:
    """An ext4 fast symlink whose target is itself (or a giant target length)."""
    links = target.tagged("inode-symlink")
    if not links or target.kind != "ext4":
        return flip_bits(rng, target)
    region = rng.choice(links)
    own = region.note.rsplit("/", 1)[-1].encode()
    if rng.random() < 0.5:
        return [Patch(region.offset + 0x28, own.ljust(60, b"\x00"), "symlink to itself"),
                Patch(region.offset + 0x04, _pack(len(own), 4, False), "its length")]
    return [Patch(region.offset + 0x04, _pack(rng.choice((59, 60, 4096, 0xFFFFFFFF)), 4,
                                              False), "a symlink's target length")]


Operator = Callable[[random.Random, Target], list[Patch]]
OPERATORS: list[tuple[Operator, int]] = [
    (flip_bits, 6), (set_field, 10), (set_bytes, 3), (copy_region, 3), (huge_lengths, 3),
    (giant_name, 2), (ntfs_flags, 1), (symlink_loop, 1)]


def _note(region: Region) -> str:
    return f" ({region.note})" if region.note else ""


def describe(patches: list[Patch]) -> str:
    return "; ".join(patch.what for patch in patches) or "no change"


class PatchedReader(FileReader):
    """A base image's reader with patches laid over its bytes, in order."""

    def __init__(self, path: Path, patches: list[Patch]) -> None:
        super().__init__(path)
        self.patches = patches

    def read(self, offset: int, length: int) -> bytes:
        data = super().read(offset, length)
        end = offset + len(data)
        touched = [p for p in self.patches
                   if p.offset < end and p.offset + len(p.data) > offset]
        if not touched:
            return data
        out = bytearray(data)
        for patch in touched:
            for i, byte in enumerate(patch.data):
                at = patch.offset + i - offset
                if 0 <= at < len(out):
                    out[at] = out[at] ^ byte if patch.xor else byte
        return bytes(out)


def write_case(target: Target, seed: int, path: Path) -> Path:
    """The mutated image of a case as a file (to replay by hand, or with the tools)."""
    patches = mutate(target, seed)
    shutil.copyfile(target.image.path, path)
    reader = PatchedReader(target.image.path, patches)
    try:
        with path.open("r+b") as out:
            for patch in patches:
                out.seek(patch.offset)
                out.write(reader.read(patch.offset, len(patch.data)))
    finally:
        reader.close()
    return path


# --- a tenant's calls ------------------------------------------------------------------

@dataclass
class Call:
    op: str
    seconds: float
    deadline: float
    outcome: str          # "ok", an error's code, or "5xx: ..." / "malformed: ..."
    detail: str = ""

    @property
    def late(self) -> bool:
        return self.seconds > self.deadline + MARGIN_SECONDS

    @property
    def failed(self) -> bool:
        return self.outcome.startswith(("5xx", "malformed"))


@dataclass
class Case:
    kind: str
    seed: int
    mutations: str
    calls: list[Call] = field(default_factory=list)
    memory_peak: int = 0
    """The largest VmHWM (resident bytes) of the case's children."""
    memory_size_peak: int = 0
    """The largest VmPeak (address space bytes: what RLIMIT_AS bounds)."""

    def problems(self, limits: ParserLimits) -> list[str]:
        found = [f"{call.op}: {call.outcome} {call.detail}" for call in self.calls
                 if call.failed]
        found += [f"{call.op}: {call.seconds:.1f} s, past its {call.deadline:g} s deadline"
                  for call in self.calls if call.late]
        if self.memory_size_peak > limits.memory_bytes:
            found.append(f"the child's address space reached {self.memory_size_peak} bytes")
        return found

    def replay(self) -> str:
        return (f"replay: PYTHONPATH=$PWD python -m tests.support.fs_fuzz --kinds {self.kind} "
                f"--replay {self.seed}")


class Tenant:
    """What a tenant does with a restore point, each call timed and classified."""

    def __init__(self, session: ParserSession, image_size: int, case: Case,
                 max_calls: int = 40) -> None:
        self.session = session
        self.limits = session.limits
        self.image_size = image_size
        self.case = case
        self.max_calls = max_calls
        self.timeouts = 0

    def call(self, op: str, check: Callable[[Any], str | None], *args: Any,
             **kwargs: Any) -> Any:
        if self.timeouts >= TIMEOUTS_PER_CASE or len(self.case.calls) >= self.max_calls:
            return None
        deadline = (self.limits.search_seconds if op in ("search", "walk")
                    else self.limits.call_seconds)
        started = time.monotonic()
        value: Any = None
        try:
            value = getattr(self.session, op)(*args, **kwargs)
        except TENANT_ERRORS as error:
            outcome, detail = error.code, error.message
            if isinstance(error, ParserLimitExceeded) and error.message.startswith("time"):
                self.timeouts += 1
        except Exception as error:  # what the service would answer with a 500
            outcome, detail = f"5xx: {type(error).__name__}", str(error)[:200]
        else:
            wrong = check(value)
            outcome, detail = ("malformed: " + wrong, repr(value)[:200]) if wrong else ("ok", "")
        self.case.calls.append(Call(op, time.monotonic() - started, deadline, outcome,
                                    detail))
        return value if outcome == "ok" else None

    def browse(self) -> None:
        partitions = self.call("partitions", self._check_partitions) or []
        readable = [p["index"] for p in partitions if p.get("readable")][:2]
        for index in readable or [None]:
            self.browse_partition(index)

    def browse_partition(self, partition: int | None) -> None:
        entries = self.list_all(partition, "/", pages=3)
        directories = [e for e in entries if e["type"] == "dir"][:3]
        files = [e for e in entries if e["type"] == "file"][:3]
        others = [e for e in entries if e["type"] not in ("dir", "file")][:1]
        for entry in directories:
            path = "/" + entry["name"]
            below = self.list_all(partition, path, pages=1)
            for deeper in [e for e in below if e["type"] == "dir"][:1]:
                self.list_all(partition, f"{path}/{deeper['name']}", pages=1)
            files += [dict(e, name=f"{entry['name']}/{e['name']}") for e in below
                      if e["type"] == "file"][:1]
        for entry in files[:4]:
            path = "/" + entry["name"]
            self.call("stat", self._check_entry, partition, path)
            self.call("runs", self._check_runs, partition, path, 1024)
            self.call("read", self._check_read(1 << 16), partition, path, 0, 1 << 16)
            if entry["size"] > 1 << 16:
                self.call("read", self._check_read(4096), partition, path,
                          entry["size"] - 100, 4096)
        for entry in others:
            self.call("stat", self._check_entry, partition, "/" + entry["name"])
            self.call("read", self._check_read(4096), partition, "/" + entry["name"], 0, 4096)
        # Paths of the source tree, whatever the listing showed: lookups through damage.
        for path in ("/hello.txt", fs_images.DEEP):
            self.call("stat", self._check_entry, partition, "/" + path.lstrip("/"))
        self.call("search", self._check_tree, partition, "/", "*.txt", 50, 5000)
        self.call("walk", self._check_tree, partition, "/", 500)

    def list_all(self, partition: int | None, path: str, pages: int) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        marker = None
        for _ in range(pages):
            page = self.call("list", self._check_listing, partition, path, marker, 10)
            if page is None:
                break
            entries += page["entries"]
            marker = page["next_marker"]
            if marker is None:
                break
        return entries

    # What the service relies on in a value (a wrong one would be its 500).

    def _check_partitions(self, value: Any) -> str | None:
        if not isinstance(value, list):
            return "not a list"
        for p in value:
            if not (isinstance(p.get("index"), int) and isinstance(p.get("readable"), bool)
                    and _natural(p.get("offset")) and _natural(p.get("size"))
                    and (not p["readable"] or p["offset"] + p["size"] <= self.image_size)):
                return "a partition's index, offset or size"
        return None

    def _check_listing(self, value: Any) -> str | None:
        if not isinstance(value, dict) or not isinstance(value.get("entries"), list):
            return "not a listing"
        if len(value["entries"]) > 10:
            return "more entries than the page's limit"
        for entry in value["entries"]:
            wrong = _entry_problem(entry)
            if wrong:
                return wrong
        marker = value.get("next_marker")
        return None if marker is None or isinstance(marker, str) else "the marker"

    def _check_entry(self, value: Any) -> str | None:
        return _entry_problem(value) or (None if isinstance(value.get("path"), str)
                                         else "no path")

    def _check_runs(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, dict) or not _natural(value.get("size")):
            return "runs without a size"
        total = 0
        for start, length in value["runs"]:
            if not _natural(length) or (start is not None and not (
                    _natural(start) and start + length <= self.image_size)):
                return "a run outside the image"
            total += length
        return None if total == value["size"] else "runs not covering the file's size"

    @staticmethod
    def _check_read(length: int) -> Callable[[Any], str | None]:
        def check(value: Any) -> str | None:
            return None if isinstance(value, bytes) and len(value) <= length else "a read's bytes"
        return check

    @staticmethod
    def _check_tree(value: Any) -> str | None:
        if not isinstance(value, dict) or not isinstance(value.get("entries"), list):
            return "not a tree"
        for entry in value["entries"]:
            wrong = _entry_problem(entry)
            if wrong:
                return wrong
        return None


def _natural(value: Any) -> bool:
    return type(value) is int and value >= 0


def _entry_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return "an entry that is not an object"
    name = entry.get("name")
    root = entry.get("path") == "/" and name == ""  # the root's name (the file service's)
    if not isinstance(name, str) or (name in ("", ".", "..") and not root):
        return "an entry without a name"
    if "/" in name or "\x00" in name:
        return "a name no path can hold"
    if entry.get("type") not in ("file", "dir", "symlink", "other"):
        return "an entry's type"
    if not _natural(entry.get("size")) or not _natural(entry.get("mode")):
        return "an entry's size or mode"
    if entry.get("mtime") is not None and not isinstance(entry["mtime"], str):
        return "an entry's mtime"
    return None


# --- the child's memory ----------------------------------------------------------------

def memory_of(pid: int) -> tuple[int, int] | None:
    """(VmHWM, VmPeak) of a running process in bytes; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        return (int(fields["VmHWM"].split()[0]) << 10, int(fields["VmPeak"].split()[0]) << 10)
    except (KeyError, ValueError, IndexError):
        return None  # a zombie: its memory is gone


class MemoryWatch:
    """The children a case's session starts (its `start`), their memory read every few ms
    while they run and just before the session kills one (Child.kill is what ends every
    child of a session)."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.children: list[Child] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def start_child(self, config: ChildConfig) -> Child:
        child = start_child(config)
        kill = child.kill

        def noted_kill() -> None:
            self.note(child)
            kill()

        child.kill = noted_kill  # type: ignore[method-assign]
        self.children.append(child)
        return child

    def note(self, child: Child) -> None:
        if child.alive():
            seen = memory_of(child.pid)
            if seen is not None:
                self.case.memory_peak = max(self.case.memory_peak, seen[0])
                self.case.memory_size_peak = max(self.case.memory_size_peak, seen[1])

    def _poll(self) -> None:
        while not self._stop.wait(0.01):
            for child in self.children[-1:]:
                self.note(child)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def run_case(target: Target, seed: int, limits: ParserLimits = PRODUCTION) -> Case:
    """One mutated image browsed through a sealed child with `limits`."""
    patches = mutate(target, seed)
    case = Case(target.kind, seed, describe(patches))
    reader = PatchedReader(target.image.path, patches)
    with MemoryWatch(case) as watch:
        session = ParserSession(reader, limits, start=watch.start_child)
        try:
            Tenant(session, reader.size, case).browse()
            for child in watch.children:
                watch.note(child)
        finally:
            session.close()
            reader.close()
    return case


# --- the figures -----------------------------------------------------------------------

@dataclass
class Tally:
    kind: str
    cases: int = 0
    calls: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    slowest: dict[str, float] = field(default_factory=dict)
    memory_peak: int = 0
    memory_size_peak: int = 0
    failures: list[tuple[Case, list[str]]] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, case: Case, limits: ParserLimits) -> None:
        self.cases += 1
        self.calls += len(case.calls)
        for call in case.calls:
            self.outcomes[call.outcome.split(":")[0]] += 1
            deadline = f"{call.deadline:g} s"
            self.slowest[deadline] = max(self.slowest.get(deadline, 0.0), call.seconds)
        self.memory_peak = max(self.memory_peak, case.memory_peak)
        self.memory_size_peak = max(self.memory_size_peak, case.memory_size_peak)
        problems = case.problems(limits)
        if problems:
            self.failures.append((case, problems))

    @property
    def hangs(self) -> int:
        return sum(1 for case, problems in self.failures for p in problems if "past its" in p)

    @property
    def errors(self) -> int:
        return self.outcomes["5xx"] + self.outcomes["malformed"]

    def lines(self, limits: ParserLimits) -> list[str]:
        outcomes = ", ".join(f"{name} {count}" for name, count in self.outcomes.most_common())
        times = ", ".join(f"{seconds:.2f} s (deadline {deadline})"
                          for deadline, seconds in sorted(self.slowest.items()))
        return [
            f"{self.kind}: {self.cases} cases, {self.calls} calls in {self.seconds:.0f} s",
            f"  outcomes: {outcomes}",
            f"  slowest call: {times or '-'}",
            f"  child memory: peak RSS {self.memory_peak / (1 << 20):.0f} MiB, peak address "
            f"space {self.memory_size_peak / (1 << 20):.0f} MiB (limit "
            f"{limits.memory_bytes >> 20} MiB)",
            f"  hangs {self.hangs}, 5xx {self.errors}, memory over the limit "
            f"{int(self.memory_size_peak > limits.memory_bytes)}",
        ]


def build_targets(directory: Path, kinds: list[str]) -> dict[str, Target]:
    """The base images (the tools tier's: tests/support/fs_images.py) and their metadata."""
    tree = fs_images.source_tree(directory / "src")
    made: dict[str, Image] = {}
    makers = {"ext4": fs_images.ext4_image, "xfs": fs_images.xfs_image,
              "ntfs": fs_images.ntfs_image, "fat32": fs_images.fat32_image,
              "btrfs": fs_images.btrfs_image}
    needed = set(kinds) | ({"ext4", "fat32"} if "gpt" in kinds else set()) | (
        {"ext4", "ntfs", "fat32"} if "mbr" in kinds else set())
    for kind, make in makers.items():
        if kind in needed:
            made[kind] = make(directory / f"{kind}.img", tree)
    if "gpt" in kinds:
        made["gpt"] = fs_images.gpt_disk(directory / "gpt.img", [made["ext4"], made["fat32"]])
    if "mbr" in kinds:
        made["mbr"] = fs_images.mbr_disk(directory / "mbr.img",
                                         [made["ext4"], made["ntfs"], made["fat32"]])
    return {kind: metadata(kind, made[kind]) for kind in kinds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fs_fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000, help="cases per kind")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--replay", type=int, help="run this one case's seed, verbosely")
    parser.add_argument("--write", type=Path, help="with --replay: write its image here")
    arguments = parser.parse_args(argv)
    kinds = [kind for kind in arguments.kinds.split(",") if kind]
    limits = PRODUCTION
    with tempfile.TemporaryDirectory(prefix="cairn-fuzz-") as tmp:
        targets = build_targets(Path(tmp), kinds)
        if arguments.replay is not None:
            return _replay(targets, arguments.replay, arguments.write, limits)
        print(f"fuzz-files: seeds {arguments.seed}..{arguments.seed + arguments.cases - 1}"
              f" per kind, kinds {', '.join(kinds)}", flush=True)
        bad = False
        for kind in kinds:
            target = targets[kind]
            print(f"{kind}: {len(target.regions)} metadata regions "
                  f"({', '.join(sorted({r.tag for r in target.regions}))})", flush=True)
            tally = Tally(kind)
            started = time.monotonic()
            for seed in range(arguments.seed, arguments.seed + arguments.cases):
                case = run_case(target, seed, limits)
                tally.add(case, limits)
                for problem in case.problems(limits):
                    print(f"  FAIL {kind} seed {seed}: {problem}\n    mutations: "
                          f"{case.mutations}\n    {case.replay()}", flush=True)
            tally.seconds = time.monotonic() - started
            print("\n".join(tally.lines(limits)), flush=True)
            bad |= bool(tally.failures)
        return 1 if bad else 0


def _replay(targets: dict[str, Target], seed: int, write: Path | None,
            limits: ParserLimits) -> int:
    status = 0
    for kind, target in targets.items():
        case = run_case(target, seed, limits)
        print(f"{kind} seed {seed}: {case.mutations}")
        for call in case.calls:
            print(f"  {call.op:10} {call.seconds:6.2f} s  {call.outcome}  {call.detail[:100]}")
        print(f"  memory: peak RSS {case.memory_peak >> 20} MiB, address space "
              f"{case.memory_size_peak >> 20} MiB")
        if write is not None:
            path = write_case(target, seed, write)
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            print(f"  written to {path} (sha256 {digest}...)")
        status |= bool(case.problems(limits))
    return status


if __name__ == "__main__":
    sys.exit(main())
