"""A selection of a restore point's files as one streamed archive: tar (tarfile's stream
mode, PAX headers: any name length, UTF-8) or zip (zipfile over a writer that cannot
seek: data descriptors after each member, ZIP64 where sizes or counts need it, deflated
at level 1).

Names are made safe for whoever extracts the archive, whatever the tenant's filesystem
held (and whatever a taken-over parser answers):

- relative: a path asked for becomes its own top-level name (`/etc/nginx` -> `nginx/...`),
  with no `..` component and no empty one;
- never twice: two paths asked for with the same last name (`/home/a/x`, `/srv/x`), or two
  names zip's rewriting makes equal, are both kept, the later one suffixed as a file
  manager does: `x (2)`, `notes (2).txt`;
- never under anything but a directory of the archive: a member whose parent was left out
  (a device, a duplicate, a link) or is a link or a file is left out with everything
  below it, so no extractor writes through a link the archive made;
- symbolic links are kept as links in tar only when their target stays inside the
  archive (relative, never above its top): a link to `/etc` or `../../..` is left out,
  as zip leaves out every link (it has no portable way to hold one);
- device files, FIFOs and sockets are left out; in zip, `\\` and `:` become `_` (a Windows
  extractor takes them for separators and drives)."""

from __future__ import annotations

import tarfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from services.errors import FilesUnreadable, ParserLimitExceeded
from worker.files.calls import Entry

Format = Literal["tar", "zip"]
MEDIA_TYPES: dict[Format, str] = {"tar": "application/x-tar", "zip": "application/zip"}
TAR_PIECE = 64 << 10
"""tar's record size here (a multiple of its 512-byte blocks)."""


@dataclass(frozen=True)
class Member:
    """One entry of the archive: its name there, and what it is in the filesystem."""

    name: str
    path: str
    type: Literal["file", "dir", "symlink"]
    size: int
    mode: int
    uid: int
    gid: int
    mtime: float
    target: str


Contents = Callable[[Member], AbstractContextManager[Iterable[bytes]]]
"""A member file's bytes (exactly its size), open while the archive writes them."""


def archive_name(path: str, base: str) -> str | None:
    """`path`'s name in an archive of `base` (a path asked for, `path` itself or below it):
    `base`'s last component and what follows; None when `path` is not under `base`, is the
    root itself, or cannot be named safely (a `..` or NUL in it)."""
    parts = _parts(path, base)
    return None if parts is None else "/".join(parts)


def _parts(path: str, base: str) -> list[str] | None:
    base = "/" + base.strip("/")
    if path != base and not path.startswith(base.rstrip("/") + "/"):
        return None
    parent = base.rsplit("/", 1)[0]
    parts = [part for part in path[len(parent):].split("/") if part not in ("", ".")]
    if not parts or any(part == ".." or "\0" in part for part in parts):
        return None
    return parts


def members(walks: Iterable[tuple[str, list[Entry]]], fmt: Format, *, max_entries: int,
            max_bytes: int) -> list[Member]:
    """The archive's members from each path asked for and its walk (the path itself and
    what lies under it, parents first), in that order, named as the module says.
    ParserLimitExceeded past `max_entries` members or `max_bytes` of file data."""
    chosen: list[Member] = []
    used: set[str] = set()
    seen: set[tuple[int, tuple[str, ...]]] = set()
    # A directory of a walk (the walk's index, its components) -> its name in the archive.
    directories: dict[tuple[int, tuple[str, ...]], str] = {}
    total = 0
    for index, (base, entries) in enumerate(walks):
        for entry in entries:
            parts = _parts(str(entry.get("path", "")), base)
            kind = entry.get("type")
            if parts is None or kind not in ("file", "dir", "symlink"):
                continue  # devices, FIFOs, sockets; what cannot be named
            key = (index, tuple(parts))
            if key in seen:
                continue  # a crafted directory listing one name twice: the first counts
            seen.add(key)
            target = str(entry.get("target") or "")
            if kind == "symlink" and (fmt == "zip" or not _inside(target, len(parts) - 1)):
                continue
            parent = "" if len(parts) == 1 else directories.get((index, tuple(parts[:-1])))
            if parent is None:
                continue  # under a name left out, a link or a file: never written through
            name = _unique(parent, _leaf(parts[-1], fmt), kind, used)
            if kind == "dir":
                directories[key] = name
            member = Member(name=name, path=str(entry["path"]), type=kind,
                            size=_size(entry.get("size")) if kind == "file" else 0,
                            mode=_id(entry.get("mode")) & 0o7777,
                            uid=_id(entry.get("uid")), gid=_id(entry.get("gid")),
                            mtime=_timestamp(entry.get("mtime")), target=target)
            chosen.append(member)
            total += member.size
            if len(chosen) > max_entries:
                raise ParserLimitExceeded(
                    f"the archive would hold more than {max_entries} entries: download "
                    "fewer files, or a directory further down", limit="entries")
            if total > max_bytes:
                raise ParserLimitExceeded(
                    f"the archive would hold more than {max_bytes} bytes of files: download "
                    "fewer files", limit="bytes")
    return chosen


def _leaf(name: str, fmt: Format) -> str:
    if fmt == "zip":
        name = name.replace("\\", "_").replace(":", "_")
        name = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return name


def _unique(parent: str, leaf: str, kind: str, used: set[str]) -> str:
    """`parent/leaf`, or the first free `leaf (n)` (before a file's extension), marked used."""
    stem, dot, extension = leaf.rpartition(".") if kind == "file" else ("", "", "")
    if not stem:  # no extension, or a dot file (".bashrc")
        stem, dot, extension = leaf, "", ""
    name = f"{parent}/{leaf}" if parent else leaf
    number = 1
    while name in used:
        number += 1
        suffixed = f"{stem} ({number}){dot}{extension}"
        name = f"{parent}/{suffixed}" if parent else suffixed
    used.add(name)
    return name


def _inside(target: str, depth: int) -> bool:
    """Whether a link `depth` directories below the archive's top, to `target`, points
    inside the archive (relative, never above its top, no NUL)."""
    if not target or target.startswith("/") or "\0" in target:
        return False
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return False
        elif part not in ("", "."):
            depth += 1
    return True


def _size(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _id(value: Any) -> int:
    return value if isinstance(value, int) and 0 <= value < 1 << 32 else 0


def _timestamp(mtime: Any) -> float:
    if not isinstance(mtime, str):
        return 0.0
    try:
        return max(0.0, datetime.fromisoformat(mtime).timestamp())
    except (ValueError, OverflowError, OSError):
        return 0.0


def write_tar(chosen: list[Member], out: Any, contents: Contents) -> None:
    """The members as a POSIX (PAX) tar, written to `out` (write, flush) without seeking."""
    # Records of TAR_PIECE: tarfile's stream mode joins what it is given to what it
    # holds and writes whole records, so small records copy each byte many times over.
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT, encoding="utf-8",
                      errors="surrogateescape", bufsize=TAR_PIECE) as tar:
        for member in chosen:
            info = tarfile.TarInfo(member.name)
            info.mode, info.uid, info.gid = member.mode, member.uid, member.gid
            info.mtime = member.mtime
            if member.type == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif member.type == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, member.target
                tar.addfile(info)
            else:
                info.size = member.size
                with contents(member) as pieces:
                    tar.addfile(info, _Exactly(pieces, member))


def write_zip(chosen: list[Member], out: Any, contents: Contents) -> None:
    """The members as a zip written to `out` (write, flush; no tell, no seek): each
    member's sizes and CRC in a data descriptor after its data, ZIP64 where needed."""
    with zipfile.ZipFile(out, mode="w", compression=zipfile.ZIP_DEFLATED, compresslevel=1,
                         allowZip64=True) as archive:
        for member in chosen:
            if member.type == "dir":
                info = zipfile.ZipInfo(member.name + "/", _zip_time(member.mtime))
                info.external_attr = ((0o040000 | member.mode) << 16) | 0x10
                archive.writestr(info, b"")
                continue
            info = zipfile.ZipInfo(member.name, _zip_time(member.mtime))
            info.external_attr = (0o100000 | member.mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            info.file_size = member.size
            with contents(member) as pieces, archive.open(
                    info, mode="w", force_zip64=member.size >= zipfile.ZIP64_LIMIT) as dest:
                written = 0
                for piece in pieces:
                    written += len(piece)
                    if written > member.size:
                        break
                    dest.write(piece)
                if written != member.size:
                    raise _short(member, written)


def _zip_time(mtime: float) -> tuple[int, int, int, int, int, int]:
    """Zip's DOS time (UTC here), within the years it can hold (1980-2107)."""
    moment = time.gmtime(min(max(mtime, 315532800.0), 4354819198.0))
    return (moment.tm_year, moment.tm_mon, moment.tm_mday, moment.tm_hour, moment.tm_min,
            moment.tm_sec)


def _short(member: Member, got: int) -> FilesUnreadable:
    return FilesUnreadable(f"{member.path}: {got} bytes read where the file holds "
                           f"{member.size}", path=member.path)


class _Exactly:
    """A member's pieces as a file tarfile reads `size` bytes from, 16 KiB at a time
    (without copying what is left of a piece at each read)."""

    def __init__(self, pieces: Iterable[bytes], member: Member) -> None:
        self._pieces: Iterator[bytes] = iter(pieces)
        self._member = member
        self._piece = memoryview(b"")
        self._at = 0
        self._given = 0

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            size = self._member.size
        out: list[memoryview] = []
        got = 0
        while got < size:
            if self._at >= len(self._piece):
                piece = next(self._pieces, None)
                if piece is None:
                    break
                self._given += len(piece)
                if self._given > self._member.size:
                    raise _short(self._member, self._given)
                self._piece, self._at = memoryview(piece), 0
            take = min(size - got, len(self._piece) - self._at)
            out.append(self._piece[self._at:self._at + take])
            self._at += take
            got += take
        if got < size:
            raise _short(self._member, self._given)
        return b"".join(out)
