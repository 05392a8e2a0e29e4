"""The operations the file service calls on one restore point's image (issue 34): its
partitions, and per filesystem: list a directory (paged), stat a path, a file's runs (where
its bytes lie on the disk, for a download that reads them straight off the restore point),
read a file's bytes, search by name, walk a tree (for archives).

Paths are absolute and "/"-separated; a ".." component is refused, never resolved; a
symlink is reported (type "symlink", its "target"), never followed, by every operation.

Names that are not valid Unicode (bytes that are not UTF-8 on ext4, XFS, Btrfs; unpaired
UTF-16 on NTFS and FAT) are listed under one reversible rule, and a lookup accepts what a
listing returns:
- a valid name is listed as it is, except that a U+FFFD REPLACEMENT CHARACTER in it is
  doubled;
- each byte 0xXY that is not UTF-8 becomes U+FFFD followed by the two upper-case hex digits
  "XY" (a Latin-1 "café" lists as "caf\ufffdE9");
- an unpaired UTF-16 code unit 0xDXYZ becomes U+FFFD, "u" and its four hex digits.
Every listed name is thus valid UTF-8 (JSON, a URL, a tar header), shows where it was damaged,
and maps back to exactly one name on the disk (paths.display_name, paths.raw_name).

Listings are sorted bytewise on the names' UTF-8; a page starts after `marker` (the last
name of the previous page). Only the directory's own blocks are read to sort it, and only
the inodes of the page's entries: a listing of / of a large volume reads a few blocks."""

from __future__ import annotations

import bisect
import fnmatch
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, BinaryIO, TypeVar

from .errors import (
    Encrypted,
    ImageReadFailed,
    IsDir,
    Limit,
    NotADir,
    NotFound,
    ParserError,
    Unreadable,
)
from .filesystems import Filesystem, Info, Node
from .paths import display_name, join_path, name_key, raw_name, split_path
from .volumes import ENCRYPTED, Volume, detect

MAX_PAGE = 1000
MAX_READ = 4 << 20
MAX_DIRECTORY_ENTRIES = 1_000_000
MAX_PATTERN = 255
DIRECTORY_CACHE_ENTRIES = 200_000
_UNNAMEABLE = frozenset(("", ".", ".."))

Entry = dict[str, Any]
Entries = list[Entry]
Volumes = list[Volume]
Directory = list[tuple[bytes, str, Node]]
"""A directory's entries sorted for listing: (name's UTF-8, listed name, node)."""
Stack = list[Iterator[tuple[str, str, Node]]]
T = TypeVar("T")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Operations:
    def __init__(self, image: BinaryIO, size: int) -> None:
        self.image = image
        self.size = size
        self._volumes: Volumes | None = None
        # Sorted listings of the directories read last: paging through a directory, or a
        # stat after a listing, does not read and sort it again (the image never changes).
        self._directories: OrderedDict[tuple[int, Hashable], Directory]
        self._directories = OrderedDict()
        self._cached_entries = 0

    # --- partitions ---------------------------------------------------------------------

    def partitions(self) -> Entries:
        return [volume.describe() for volume in self._partitions()]

    def _partitions(self) -> Volumes:
        if self._volumes is None:
            self._volumes = detect(self.image, self.size)
        return self._volumes

    def _volume(self, partition: int | None) -> tuple[Volume, Filesystem]:
        volumes = self._partitions()
        if partition is None:
            for volume in volumes:
                if volume.filesystem is not None:
                    return volume, volume.filesystem
            if any(volume.reason == ENCRYPTED for volume in volumes):
                raise Encrypted(ENCRYPTED)
            reasons = "; ".join(sorted({v.reason for v in volumes if v.reason}))
            raise Unreadable(reasons or "no filesystem Cairn can read")
        for volume in volumes:
            if volume.index == partition:
                if volume.filesystem is not None:
                    return volume, volume.filesystem
                if volume.reason == ENCRYPTED:
                    raise Encrypted(ENCRYPTED)
                raise Unreadable(f"partition {partition}: {volume.reason}")
        raise NotFound(f"no partition {partition}")

    # --- directories --------------------------------------------------------------------

    def list(self, partition: int | None, path: str, marker: str | None,
             limit: int) -> dict[str, Any]:
        volume, fs = self._volume(partition)
        node, shown = self._resolve(volume, fs, path)
        entries = self._directory(volume, fs, node, shown)
        start = 0 if marker is None else bisect.bisect_right(entries, (name_key(marker),))
        # bisect on (key,) sorts before (key, name, node): step over an equal key.
        while start < len(entries) and marker is not None and entries[start][0] <= name_key(
                marker):
            start += 1
        limit = max(1, min(limit, MAX_PAGE))
        page = entries[start:start + limit]
        more = start + limit < len(entries)
        return {"path": shown, "partition": volume.index,
                "entries": [self._entry(fs, name, child) for _, name, child in page],
                "next_marker": page[-1][1] if more and page else None}

    def stat(self, partition: int | None, path: str) -> Entry:
        volume, fs = self._volume(partition)
        node, shown = self._resolve(volume, fs, path)
        # The root's name is "": no name holds '/' (the file service refuses one that does).
        name = shown.rsplit("/", 1)[1]
        return {**self._entry(fs, name, node), "path": shown}

    # --- file data ----------------------------------------------------------------------

    def runs(self, partition: int | None, path: str, max_runs: int) -> dict[str, Any] | None:
        volume, fs = self._volume(partition)
        node, shown = self._resolve(volume, fs, path)
        info = self._file(fs, node, shown)
        runs = _guard(lambda: fs.runs(node))
        if runs is None or len(runs) > max_runs:
            return None
        return {"size": info.size,
                "runs": [[None if start is None else volume.offset + start, length]
                         for start, length in runs]}

    def read(self, partition: int | None, path: str, offset: int, length: int) -> bytes:
        if length > MAX_READ:
            raise Limit(f"a read is at most {MAX_READ} bytes")
        if offset < 0 or length < 0:
            raise Limit("a read's offset and length are not negative")
        volume, fs = self._volume(partition)
        node, shown = self._resolve(volume, fs, path)
        info = self._file(fs, node, shown)
        length = min(length, max(0, info.size - offset))
        if length == 0:
            return b""
        return _guard(lambda: fs.read(node, offset, length))

    # --- trees --------------------------------------------------------------------------

    def search(self, partition: int | None, path: str, pattern: str, limit: int,
               max_visits: int) -> dict[str, Any]:
        if len(pattern) > MAX_PATTERN:
            raise Limit(f"a pattern is at most {MAX_PATTERN} characters")
        volume, fs = self._volume(partition)
        node, shown = self._resolve(volume, fs, path)
        self._require_dir(fs, node, shown)
        found: Entries = []
        visited = 0
        truncated = False
        for child_path, name, child in self._tree(volume, fs, node, shown):
            visited += 1
            if fnmatch.fnmatchcase(name, pattern):
                if len(found) >= limit:
                    truncated = True
                    break
                found.append({**self._entry(fs, name, child), "path": child_path})
            if visited >= max_visits:
                truncated = True
                break
        return {"entries": found, "truncated": truncated, "visited": visited}

    def walk(self, partition: int | None, path: str, max_entries: int) -> dict[str, Any]:
        volume, fs = self._volume(partition)
        node, shown = self._resolve(volume, fs, path)
        if max_entries < 1:
            return {"entries": [], "truncated": True}
        top = shown.rsplit("/", 1)[1]  # "" for the root, as `stat` names it
        entries: Entries = [{**self._entry(fs, top, node), "path": shown}]
        truncated = False
        if entries[0]["type"] == "dir":
            for child_path, name, child in self._tree(volume, fs, node, shown):
                if len(entries) >= max_entries:
                    truncated = True
                    break
                entries.append({**self._entry(fs, name, child), "path": child_path})
        return {"entries": entries, "truncated": truncated}

    # --- helpers ------------------------------------------------------------------------

    def _resolve(self, volume: Volume, fs: Filesystem, path: str) -> tuple[Node, str]:
        parts = split_path(path)
        node = _guard(fs.root)
        shown = "/"
        for part in parts:
            self._require_dir(fs, node, shown)
            entries = self._directory(volume, fs, node, shown)
            key = name_key(part)
            at = bisect.bisect_left(entries, (key,))
            if at >= len(entries) or entries[at][0] != key:
                raw_name(part)  # a name no listing shows: say so in the message
                raise NotFound(f"{join_path(shown, part)} does not exist")
            node = entries[at][2]
            shown = join_path(shown, part)
        return node, shown

    def _require_dir(self, fs: Filesystem, node: Node, shown: str) -> None:
        info = _guard(lambda: fs.info(node))
        if info.type == "symlink":
            raise NotADir(f"{shown} is a symlink (not followed)")
        if info.type != "dir":
            raise NotADir(f"{shown} is not a directory")

    def _file(self, fs: Filesystem, node: Node, shown: str) -> Info:
        info = _guard(lambda: fs.info(node))
        if info.type == "dir":
            raise IsDir(f"{shown} is a directory")
        if info.type == "symlink":
            raise IsDir(f"{shown} is a symlink (not followed)")
        if info.type != "file":
            raise IsDir(f"{shown} is not a regular file")
        return info

    def _directory(self, volume: Volume, fs: Filesystem, node: Node,
                   shown: str) -> Directory:
        key = (volume.index, _guard(lambda: fs.identity(node)))
        cached = self._directories.get(key)
        if cached is not None:
            self._directories.move_to_end(key)
            return cached
        self._require_dir(fs, node, shown)
        entries: Directory = []

        def read() -> None:
            for raw, child in fs.children(node):
                if raw in _UNNAMEABLE:
                    continue  # a damaged entry no path can name (the fuzz made them)
                # A "/" or NUL in a crafted name is escaped by display_name (a name is
                # always one component of a path), not dropped: the file stays reachable.
                name = display_name(raw)
                entries.append((name_key(name), name, child))
                if len(entries) > MAX_DIRECTORY_ENTRIES:
                    raise Limit(f"{shown} has more than {MAX_DIRECTORY_ENTRIES} entries")

        _guard(read)
        # A crafted directory may name one file twice: keep the first, as a lookup would.
        entries.sort(key=lambda entry: entry[0])
        unique = [entry for i, entry in enumerate(entries)
                  if i == 0 or entries[i - 1][0] != entry[0]]
        self._directories[key] = unique
        self._cached_entries += len(unique)
        while self._cached_entries > DIRECTORY_CACHE_ENTRIES and len(self._directories) > 1:
            _, dropped = self._directories.popitem(last=False)
            self._cached_entries -= len(dropped)
        return unique

    def _tree(self, volume: Volume, fs: Filesystem, node: Node,
              shown: str) -> Iterator[tuple[str, str, Node]]:
        """Everything under directory `node`, depth first, parents before children, names
        in listing order; a directory met twice (a cycle a crafted filesystem holds) is not
        entered again, nor is a symlink."""
        seen = {_guard(lambda: fs.identity(node))}
        stack: Stack = [
            iter([(join_path(shown, name), name, child)
                  for _, name, child in self._directory(volume, fs, node, shown)])]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                continue
            child_path, name, child = step
            yield child_path, name, child
            info = _guard(partial(fs.info, child))
            if info.type != "dir":
                continue
            identity = _guard(partial(fs.identity, child))
            if identity in seen:
                continue
            seen.add(identity)
            stack.append(iter([(join_path(child_path, grand_name), grand_name, grand)
                               for _, grand_name, grand in
                               self._directory(volume, fs, child, child_path)]))

    def _entry(self, fs: Filesystem, name: str, node: Node) -> Entry:
        info = _guard(lambda: fs.info(node))
        return {"name": name, "type": info.type, "size": info.size, "mode": info.mode,
                "uid": info.uid, "gid": info.gid, "mtime": iso_time(info.mtime_ns),
                "target": (display_name(info.target, separators=False)
                           if info.target is not None else None)}


def iso_time(ns: int | None) -> str | None:
    """ISO 8601 in UTC with microseconds ("2026-11-27T06:00:00.123456Z"); None when the
    filesystem's time is out of any calendar's range (a crafted inode)."""
    if ns is None:
        return None
    try:
        moment = _EPOCH + timedelta(microseconds=ns // 1000)
    except OverflowError:
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _guard(call: Callable[[], T]) -> T:
    """`call`, a library's error on the tenant's bytes turned into Unreadable (the image
    reader's own failure and the parser's answers pass through, and so does MemoryError:
    the child answers it as its memory limit, and the session replaces it, as bloated as
    it is, rather than let it serve another call)."""
    try:
        return call()
    except (ParserError, ImageReadFailed, MemoryError):
        raise
    except RecursionError:
        raise Unreadable("the filesystem is damaged: its structures nest too deep") from None
    except Exception as error:
        text = str(error).strip().splitlines()
        detail = text[0][:120] if text else type(error).__name__
        raise Unreadable(f"the filesystem is damaged: {detail}") from None
