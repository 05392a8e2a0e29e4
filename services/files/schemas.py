"""What the file routes answer, as the OpenAPI document (and so the portal's types) shows
it. The file service (`worker/files/`) builds these answers; the API passes them on as they
come, so these models describe the wire, they are not re-validated on it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

FilesystemKind = Literal["ext2", "ext3", "ext4", "xfs", "ntfs", "fat12", "fat16", "fat32",
                         "btrfs"]
EntryType = Literal["file", "dir", "symlink", "other"]


class FilePartition(BaseModel):
    index: int = Field(description="Pass as `partition` to read this one")
    scheme: Literal["gpt", "mbr", "lvm", "disk"] = Field(
        description="Where it was found: a GPT or MBR partition, an LVM2 logical volume, or "
                    "`disk`: a filesystem on the whole volume, no partition table")
    offset: int = Field(description="Its first byte on the volume")
    size: int = Field(description="Its size in bytes")
    type: str | None = Field(description="The partition type (GPT type GUID, MBR type)")
    name: str | None = Field(description="The partition's or logical volume's name")
    filesystem: FilesystemKind | None = Field(description="null: none Cairn can read")
    label: str | None = Field(description="The filesystem's label")
    readable: bool = Field(description="Whether its files can be listed")
    reason: str | None = Field(description="Why not, when not readable (an encrypted "
                                           "volume, an unknown filesystem)")


class FilePartitionList(BaseModel):
    partitions: list[FilePartition]


class FileEntry(BaseModel):
    name: str = Field(description="The entry's name (names that are not UTF-8: "
                                  "docs/files.md)")
    type: EntryType = Field(description="`other`: a device, a FIFO or a socket")
    size: int = Field(description="Bytes (a file's length; a symlink's target's length)")
    mode: int = Field(description="The permission bits and file type, as st_mode")
    uid: int | None
    gid: int | None
    mtime: datetime | None = Field(description="Last modification, UTC")
    target: str | None = Field(description="A symlink's target (never followed)")


class FilePathEntry(FileEntry):
    path: str = Field(description="Its absolute path in the filesystem")


class FileListing(BaseModel):
    path: str
    partition: int = Field(description="The partition listed (the first readable one "
                                       "when the request named none)")
    entries: list[FileEntry] = Field(description="Sorted by name (bytewise, UTF-8)")
    next_marker: str | None = Field(
        description="Pass as `marker` to get the next page; null on the last page")


class FileSearchResult(BaseModel):
    entries: list[FilePathEntry]
    truncated: bool = Field(description="The search stopped at `limit` matches, or at the "
                                        "entries or time it may visit: more may match")
    visited: int = Field(description="Entries looked at")


class FileVersion(BaseModel):
    restore_point_id: str
    present: bool = Field(description="Whether the path exists in this restore point")
    type: EntryType | None
    size: int | None
    mtime: datetime | None
    sha256: str | None = Field(description="Of the file's bytes; null for what is not a "
                                           "file, or a file over the service's hash limit")
    reason: str | None = Field(description="Why the restore point could not be read "
                                           "(then `present` is false)")


class FileVersions(BaseModel):
    path: str
    versions: list[FileVersion] = Field(description="Newest restore point first")
