"""The partitions of an image and the filesystem each holds.

In this order: a GPT (its header at sector 1); a filesystem on the whole disk (no table:
what a cloud image's data volume often is); an MBR with its extended partitions; a LUKS
header; else nothing readable. A filesystem is looked for before an MBR because a FAT boot
sector ends with the MBR's signature too (and mkfs.fat's lower-case "mkfs.fat" OEM name gets
past Dissect's own check for one).

The tables are the tenant's bytes: Dissect reads them through a budget of reads (a GPT
claiming four billion entries, an EBR chain looping back on itself end in Unreadable, not a
hang), sizes from the table are recomputed (Dissect's GPT size is one sector short: the
last LBA is inclusive) and every partition is cut to the image.

LVM2 physical volumes and LUKS volumes are listed, not read (readable false, a reason)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from dissect.volume.disk import Disk
from dissect.volume.disk.schemes import GPT, MBR

from .errors import ImageReadFailed, Limit
from .filesystems import KINDS, Filesystem

SECTOR = 512
MAX_PARTITIONS = 128
MAX_TABLE_READS = 4096
ENCRYPTED = "encrypted volume: files cannot be listed"
LUKS_MAGIC = b"LUKS\xba\xbe"
LVM_LABEL = b"LABELONE"
_EXTENDED = (0x05, 0x0F, 0x85)


@dataclass
class Volume:
    index: int
    scheme: str
    offset: int
    size: int
    type: str | None = None
    name: str | None = None
    filesystem: Filesystem | None = field(default=None, repr=False)
    reason: str | None = None

    def describe(self) -> dict[str, Any]:
        fs = self.filesystem
        return {"index": self.index, "scheme": self.scheme, "offset": self.offset,
                "size": self.size, "type": self.type, "name": self.name,
                "filesystem": fs.name if fs else None, "label": fs.label if fs else None,
                "readable": fs is not None, "reason": None if fs else self.reason}


class Window:
    """`size` bytes of `fh` from `offset`: what a filesystem parser reads as its partition
    (never past the partition, never past the image)."""

    def __init__(self, fh: BinaryIO, offset: int, size: int, budget: int | None = None) -> None:
        self.fh = fh
        self.offset = offset
        self.size = size
        self.position = 0
        self.budget = budget

    def seek(self, position: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            position += self.position
        elif whence == io.SEEK_END:
            position += self.size
        self.position = max(0, position)
        return self.position

    def tell(self) -> int:
        return self.position

    def read(self, length: int = -1) -> bytes:
        if self.budget is not None:
            self.budget -= 1
            if self.budget < 0:
                raise Limit("the partition table is too large or loops")
        end = self.size if length is None or length < 0 else min(self.size, self.position + length)
        if end <= self.position:
            return b""
        self.fh.seek(self.offset + self.position)
        data = self.fh.read(end - self.position)
        self.position += len(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True


def detect(image: BinaryIO, size: int) -> list[Volume]:
    disk = Window(image, 0, size)
    disk.seek(0)
    head = disk.read(2 * SECTOR)
    if head[SECTOR:SECTOR + 8] == b"EFI PART":
        return _table(image, size, "gpt")
    whole = Volume(index=1, scheme="disk", offset=0, size=size)
    _classify(whole, image, size)
    if whole.filesystem is not None:
        return [whole]
    if head[510:512] == b"\x55\xaa" and whole.reason != ENCRYPTED:
        return _table(image, size, "mbr")
    if whole.reason is None:
        whole.reason = "no partition table or filesystem Cairn can read"
    return [whole]


def _table(image: BinaryIO, size: int, scheme: str) -> list[Volume]:
    budgeted: Any = Window(image, 0, size, budget=MAX_TABLE_READS)
    try:
        table = Disk(budgeted, sector_size=SECTOR)
    except (ImageReadFailed, MemoryError):
        raise
    except Exception as error:  # a table the library cannot parse: say so, never a 500
        return [Volume(index=1, scheme=scheme, offset=0, size=size,
                       reason=f"damaged partition table: {_short(error)}")]
    primaries = list(table.scheme.mbr.part) if isinstance(table.scheme, MBR) else []
    volumes: list[Volume] = []
    logical = 5
    for partition in table.partitions[:MAX_PARTITIONS]:
        if isinstance(table.scheme, GPT) and partition.guid is not None:
            raw = partition.raw
            if bytes(raw.type_guid) == bytes(16):
                continue  # the UEFI spec's unused entry (Dissect skips only first_lba 0)
            number = int(partition.number)
            offset = int(raw.first_lba) * SECTOR
            length = (int(raw.last_lba) - int(raw.first_lba) + 1) * SECTOR
            kind, name = "gpt", partition.name or None
        else:
            if partition.type in _EXTENDED:
                continue
            slot = next((i for i, entry in enumerate(primaries) if entry is partition.raw), None)
            if slot is None:
                number, logical = logical, logical + 1
            else:
                number = slot + 1
            offset, length = int(partition.offset), int(partition.size)
            kind, name = "mbr", None
        volume = Volume(index=number, scheme=kind, offset=offset, size=max(0, length),
                        type=str(partition.type_str), name=name)
        if offset >= size or length <= 0:
            volume.size = 0
            volume.reason = "the partition lies outside the disk"
        else:
            volume.size = min(length, size - offset)
            _classify(volume, image, size)
        volumes.append(volume)
    volumes.sort(key=lambda volume: volume.index)
    return volumes


def _classify(volume: Volume, image: BinaryIO, image_size: int) -> None:
    view: Any = Window(image, volume.offset, volume.size)
    for kind in KINDS:
        try:
            if not kind.probe(view, volume.size):
                continue
            volume.filesystem = kind(view, volume.size)
            return
        except (ImageReadFailed, MemoryError):
            raise
        except Exception as error:  # a damaged filesystem: listed, not readable
            volume.reason = f"damaged {kind.kind} filesystem: {_short(error)}"
            return
    view.seek(0)
    head = view.read(2 * SECTOR)
    if head.startswith(LUKS_MAGIC):
        volume.reason = ENCRYPTED
    elif head[SECTOR:SECTOR + 8] == LVM_LABEL:
        volume.reason = "LVM2 physical volume: its logical volumes are not read"
    elif volume.scheme != "disk":
        volume.reason = "no filesystem Cairn can read"


def _short(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0][:120] if text else type(error).__name__
