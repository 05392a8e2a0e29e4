"""A tree of files below a root directory whose content nobody vouches for (a directory
target's, `directory.py`): how to name a path in it, open what is there and list it
without ever leaving it.

- A key names a path only if each part is a plain name (no `..`, `.`, empty part, leading
  slash or dot, control character, or more than NAME_MAX bytes): anything else is refused
  before any file is touched (`key_parts`).
- Every part below the root is opened relative to its parent with O_NOFOLLOW (O_DIRECTORY
  for directories), so a symbolic link, or anything other than a directory where one is
  expected or a regular file where a file is, is refused as DataCorrupt naming it: never
  followed out of the tree, and never opened when it is a FIFO or a device.
- A listing follows no link, walks no deeper than Cairn's keys go, and shows only regular
  files (others are logged and left alone).

The root itself is the operator's and is followed as given (a symbolic link to a mount is
fine). It is opened anew for every operation: a descriptor kept from before an NFS mount
appeared would go on reaching the local directory below the mount point.

OSError comes out as it is (the caller says what it was doing); what the tree refuses is
Cairn's error."""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from services.errors import DataCorrupt, StorageError, StorageUnavailable
from services.storage.chunk_backend import StoredObject

log = logging.getLogger(__name__)

_NAME_BYTES = 255
"""NAME_MAX of Linux's file systems (and NFS's)."""
_DEPTH = 6
"""How deep a listing walks: Cairn's keys are at most four parts deep."""
_DIR_MODE = 0o750
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def key_parts(key: str) -> list[str]:
    """The names a key's path is made of; StorageError when it is not a plain relative
    path of plain names (what Cairn's keys are, `object_layout.py`)."""
    parts = key.split("/")
    for part in parts:
        # isprintable() is False for control characters and lone surrogates alike, so
        # what passes encodes to UTF-8.
        if not part or part.startswith(".") or not part.isprintable() \
                or len(part.encode()) > _NAME_BYTES:
            raise StorageError(
                f"the key {key!r} does not name a file under a directory target: each part "
                "of it must be a plain name (not empty, no leading dot, no control "
                "characters, at most 255 bytes)")
    return parts


class FileTree:
    """Thread-safe: every call opens what it needs; the caller closes what it is given."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def open_root(self) -> int:
        try:
            return os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise StorageUnavailable(f"the directory target's path {self.root} does not "
                                     "exist (not mounted here?)") from None
        except NotADirectoryError:
            raise StorageUnavailable(f"the directory target's path {self.root} is not a "
                                     "directory") from None

    def open_dirs(self, names: Sequence[str], *, create: bool) -> int | None:
        """A descriptor of the directory `names` below the root (the caller closes it);
        None when one of them is missing and not `create`. A directory made on the way
        has its entry fsynced in its parent: it survives a crash with what goes in it."""
        fd = self.open_root()
        try:
            for depth, name in enumerate(names, 1):
                child = self._child(fd, name, "/".join(names[:depth]), create=create)
                if child is None:
                    return None
                os.close(fd)
                fd = child
            opened, fd = fd, -1
            return opened
        finally:
            if fd != -1:
                os.close(fd)

    def _child(self, fd: int, name: str, where: str, *, create: bool) -> int | None:
        try:
            return self._open_dir(fd, name, where)
        except FileNotFoundError:
            if not create:
                return None
        try:
            os.mkdir(name, _DIR_MODE, dir_fd=fd)
        except FileExistsError:
            pass  # made a moment ago by another writer
        else:
            os.fsync(fd)
        return self._open_dir(fd, name, where)

    def _open_dir(self, fd: int, name: str, where: str) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            found = os.stat(name, dir_fd=fd, follow_symlinks=False)
            raise self.foreign(where, found.st_mode, "a directory") from None

    def open_file(self, fd: int, name: str, key: str) -> int | None:
        """A read-only descriptor of the regular file `name` in the directory `fd`; None
        when there is none."""
        if self._regular(fd, name, key) is None:
            return None
        # O_NONBLOCK: were it swapped for a FIFO since the look above, opening it must not
        # wait for a writer (the check below then refuses it).
        try:
            file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                           dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self.foreign(key, stat.S_IFLNK) from None
            raise
        mode = os.fstat(file).st_mode
        if not stat.S_ISREG(mode):
            os.close(file)
            raise self.foreign(key, mode)
        return file

    def size(self, fd: int, name: str, key: str) -> int | None:
        """The size of the regular file `name` in the directory `fd`; None when there is
        none."""
        found = self._regular(fd, name, key)
        return None if found is None else found.st_size

    def _regular(self, fd: int, name: str, key: str) -> os.stat_result | None:
        """`name`'s status in the directory `fd`, never following a link; None when there
        is none; anything but a regular file is refused."""
        try:
            found = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(found.st_mode):
            raise self.foreign(key, found.st_mode)
        return found

    def listing(self, prefix: str, wanted: Callable[[str], bool]) -> Iterator[StoredObject]:
        """The regular files whose key starts with `prefix` and whose name is `wanted`, in
        key order."""
        head = prefix.rpartition("/")[0]
        dirs = key_parts(head) if head else []
        fd = self.open_dirs(dirs, create=False)
        if fd is not None:
            yield from self._walk(fd, f"{head}/" if head else "", prefix, wanted, len(dirs))

    def _walk(self, fd: int, base: str, prefix: str, wanted: Callable[[str], bool],
              depth: int) -> Iterator[StoredObject]:
        """The files below the directory `fd` (closed at the end) whose key starts with
        `prefix`, in key order: a directory sorts as its name and a slash, as the keys
        below it do."""
        try:
            found: list[tuple[str, str, bool]] = []
            with os.scandir(fd) as entries:
                for entry in entries:
                    key = base + entry.name
                    if entry.is_dir(follow_symlinks=False):
                        below = f"{key}/"
                        if not entry.name.startswith(".") and (
                                below.startswith(prefix) or prefix.startswith(below)):
                            found.append((below, entry.name, True))
                    elif entry.is_file(follow_symlinks=False):
                        if wanted(entry.name) and key.startswith(prefix):
                            found.append((key, entry.name, False))
                    elif not entry.name.startswith("."):
                        log.warning("%s/%s in a directory target is a %s: not Cairn's, left "
                                    "alone", self.root, key,
                                    _kind(entry.stat(follow_symlinks=False).st_mode))
            for key, name, is_dir in sorted(found):
                if not is_dir:
                    try:
                        held = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # deleted since the listing
                    if stat.S_ISREG(held.st_mode):
                        yield StoredObject(key, held.st_size,
                                           datetime.fromtimestamp(held.st_mtime, UTC))
                    continue
                if depth >= _DEPTH:
                    log.warning("%s/%s in a directory target is deeper than any key Cairn "
                                "writes: not Cairn's, left alone", self.root, key)
                    continue
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                        continue  # gone, or swapped for something else since the listing
                    raise
                yield from self._walk(child, key, prefix, wanted, depth + 1)
        finally:
            os.close(fd)

    def foreign(self, where: str, mode: int, expected: str = "a file") -> DataCorrupt:
        """`where`: the path below the root, where Cairn keeps `expected` and finds
        something else."""
        log.warning("directory target at %s: %s is a %s, not %s Cairn made", self.root,
                    where, _kind(mode), expected)
        return DataCorrupt(f"{where} in the directory target at {self.root} is a "
                           f"{_kind(mode)}, not {expected} Cairn made: it was replaced "
                           "outside Cairn, and is neither followed nor read")


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    return "special file (FIFO, socket or device)"
