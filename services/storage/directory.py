"""One POSIX directory (a local file system, or an NFS mount shared by every Cairn process):
the driver of directory targets. A `ChunkBackend` (`chunk_backend.py`): each blob a file
under the directory, its key the file's path below it (`chunks/<project>/<ab>/<name>`).

Writes are whole or absent after a crash: the data goes to a temporary file in the key's
own directory (`.tmp.<random>`), which is fsynced, then renamed over the key (`put`) or
hard-linked to it (`put_new`: link(2) fails when the name exists, so of any number of
writers, on one host or several, exactly one creates it); then the directory is fsynced,
and so is the parent of every directory made on the way. A temporary file left by a
process killed before its rename is never listed as a blob; the orphan reconciler removes
it after its grace (`temporaries`, `remove_temporary`).

Whoever can write the directory can put anything in it, so its content is not trusted:
- a key names a path only if each part is a plain name (no `..`, `.`, empty part,
  absolute path, leading dot, control character or over-long name): anything else is
  refused before any file is touched;
- every part below the configured path is opened relative to its parent with O_NOFOLLOW
  (O_DIRECTORY for directories), so a symbolic link or anything other than a directory or
  a regular file where Cairn expects one is refused as DataCorrupt, never followed out of
  the directory, and never opened when it is a FIFO or a device;
- every read names the most its blob can hold, and a longer file is refused (DataCorrupt)
  without the rest being read;
- a listing follows no link, walks no deeper than Cairn's keys go, and shows only regular
  files whose names Cairn could have written.
The configured path itself is the operator's and is followed as given (a symbolic link to
the mount is fine). It is opened anew for every operation: a descriptor kept from before
the NFS mount appeared would write below the mount point, on the local disk.

Unlike an S3 read, a read here cannot be bounded in time: an NFS server that stops
answering holds the reading thread for as long as the mount's own options say
(docs/operations.md, "Directory targets")."""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import stat
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from services.errors import (
    CairnError,
    DataCorrupt,
    StorageError,
    StorageFull,
    StorageUnavailable,
)
from services.storage.chunk_backend import StoredObject

log = logging.getLogger(__name__)

_TEMPORARY = ".tmp."
_TEMPORARY_NAME = re.compile(r"^\.tmp\.[0-9a-f]{32}$")
_NAME_BYTES = 255
"""NAME_MAX of Linux's file systems (and NFS's)."""
_DEPTH = 6
"""How deep a listing walks: Cairn's keys are at most four parts deep."""
_DIR_MODE = 0o750
_FILE_MODE = 0o640
_READ_PIECE = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FULL = {errno.ENOSPC, errno.EDQUOT}
_AWAY = {errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EROFS, errno.ESTALE,
         errno.EIO, errno.ENOTCONN, errno.ETIMEDOUT, errno.EHOSTDOWN, errno.EHOSTUNREACH,
         errno.ENETUNREACH, errno.ENODEV, errno.ENXIO}
"""Errors of a mount that is gone, stale, read-only or not this process's to write: the
job can be tried again once the operator has seen to it."""


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


class Directory:
    """Thread-safe: every call opens what it needs and closes it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    # -- the ChunkBackend -------------------------------------------------------------------
    def put(self, key: str, data: bytes) -> None:
        *dirs, name = key_parts(key)
        try:
            fd = self._open_dirs(dirs, create=True)
            assert fd is not None
            try:
                temporary = self._write_temporary(fd, data)
                try:
                    os.rename(temporary, name, src_dir_fd=fd, dst_dir_fd=fd)
                except BaseException:
                    _unlink_quietly(fd, temporary)
                    raise
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise self._fail(f"writing {key}", exc) from None

    def put_new(self, key: str, data: bytes) -> bool:
        """Writes the file only if there is none under `key` (link(2) decides, atomically,
        on a local file system and over NFS alike); False when one is there already."""
        *dirs, name = key_parts(key)
        try:
            fd = self._open_dirs(dirs, create=True)
            assert fd is not None
            try:
                temporary = self._write_temporary(fd, data)
                try:
                    try:
                        os.link(temporary, name, src_dir_fd=fd, dst_dir_fd=fd,
                                follow_symlinks=False)
                        made = True
                    except FileExistsError:
                        # Over NFS a LINK whose answer was lost is sent again, and the
                        # second answers "exists" for the link the first one made: the
                        # temporary file's link count says whose it is (open(2), O_EXCL).
                        made = os.stat(temporary, dir_fd=fd,
                                       follow_symlinks=False).st_nlink == 2
                finally:
                    _unlink_quietly(fd, temporary)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise self._fail(f"writing {key}", exc) from None
        return made

    def get(self, key: str, *, limit: int) -> bytes | None:
        """The file's bytes, None when there is none. `limit`: the most it can legitimately
        hold; a longer one is refused with DataCorrupt and the rest of it is never read."""
        *dirs, name = key_parts(key)
        try:
            fd = self._open_dirs(dirs, create=False)
            if fd is None:
                return None
            try:
                file = self._open_file(fd, name, key)
                if file is None:
                    return None
                try:
                    return self._read(file, key, limit)
                finally:
                    os.close(file)
            finally:
                os.close(fd)
        except OSError as exc:
            raise self._fail(f"reading {key}", exc) from None

    def size(self, key: str) -> int | None:
        *dirs, name = key_parts(key)
        try:
            fd = self._open_dirs(dirs, create=False)
            if fd is None:
                return None
            try:
                try:
                    found = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    return None
            finally:
                os.close(fd)
        except OSError as exc:
            raise self._fail(f"looking up {key}", exc) from None
        if not stat.S_ISREG(found.st_mode):
            raise self._foreign(key, found.st_mode)
        return found.st_size

    def delete(self, key: str) -> None:
        """Removes the file; one already gone is no error. The directory is not fsynced:
        a removal a crash undoes leaves garbage the next collection or orphan scan finds
        again, never a blob that is missing."""
        *dirs, name = key_parts(key)
        self._unlink(dirs, name, key)

    def holds_any(self, prefix: str) -> bool:
        with closing(self._listing(prefix, _is_blob)) as found:
            return next(found, None) is not None

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        """Every file whose key starts with `prefix`, in key order; no temporary file, and
        nothing that is not a regular file (logged, left alone)."""
        return self._listing(prefix, _is_blob)

    def close(self) -> None:
        """Nothing is held between calls."""

    # -- for the directory target ----------------------------------------------------------
    def check(self) -> None:
        """Raises StorageUnavailable unless the path is a directory this process may write
        in, on a file system mounted read-write."""
        try:
            fd = self._open_root()
            try:
                read_only = bool(os.fstatvfs(fd).f_flag & os.ST_RDONLY)
            finally:
                os.close(fd)
        except OSError as exc:
            raise self._fail("a check of the directory", exc) from None
        if read_only:
            raise StorageUnavailable(f"the directory target's path {self.root} is on a file "
                                     "system mounted read-only")
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise StorageUnavailable(f"the directory target's path {self.root} is not "
                                     f"writable by this process (uid {os.geteuid()})")

    def temporaries(self) -> Iterator[StoredObject]:
        """The temporary files of writes that never finished (their process was killed
        between its write and its rename), anywhere under the directory."""
        return self._listing("", _is_temporary)

    def remove_temporary(self, key: str) -> None:
        """Removes one of `temporaries()`; refuses any other key."""
        *dirs, name = key.split("/")
        if not _TEMPORARY_NAME.match(name):
            raise StorageError(f"{key!r} is not a temporary file of a directory target")
        if dirs:
            key_parts("/".join(dirs))
        self._unlink(dirs, name, key)

    # -- paths ------------------------------------------------------------------------------
    def _open_root(self) -> int:
        try:
            return os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise StorageUnavailable(f"the directory target's path {self.root} does not "
                                     "exist (not mounted here?)") from None
        except NotADirectoryError:
            raise StorageUnavailable(f"the directory target's path {self.root} is not a "
                                     "directory") from None

    def _open_dirs(self, names: Sequence[str], *, create: bool) -> int | None:
        """A descriptor of the directory `names` below the root (the caller closes it);
        None when one of them is missing and not `create`."""
        fd = self._open_root()
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
            os.fsync(fd)  # its entry survives a crash, with what is written into it
        return self._open_dir(fd, name, where)

    def _open_dir(self, fd: int, name: str, where: str) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            found = os.stat(name, dir_fd=fd, follow_symlinks=False)
            raise self._foreign(where, found.st_mode, "a directory") from None

    def _open_file(self, fd: int, name: str, key: str) -> int | None:
        try:
            found = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(found.st_mode):
            raise self._foreign(key, found.st_mode)
        # O_NONBLOCK: were it swapped for a FIFO since the look above, opening it must not
        # wait for a writer (the check below then refuses it).
        try:
            file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                           dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._foreign(key, stat.S_IFLNK) from None
            raise
        mode = os.fstat(file).st_mode
        if not stat.S_ISREG(mode):
            os.close(file)
            raise self._foreign(key, mode)
        return file

    def _read(self, file: int, key: str, limit: int) -> bytes:
        announced = os.fstat(file).st_size
        if announced > limit:
            raise self._too_large(key, f"{announced} bytes", limit)
        pieces: list[bytes] = []
        held = 0
        while piece := os.read(file, min(_READ_PIECE, limit + 1 - held)):
            pieces.append(piece)
            held += len(piece)
            if held > limit:
                raise self._too_large(key, f"more than {limit} bytes", limit)
        return b"".join(pieces)

    def _write_temporary(self, fd: int, data: bytes) -> str:
        """A new file holding `data`, on disk, in the directory `fd`; its name."""
        name = _TEMPORARY + secrets.token_hex(16)
        file = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                       | os.O_CLOEXEC, _FILE_MODE, dir_fd=fd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(file, view):]
                os.fsync(file)
            finally:
                os.close(file)  # over NFS, close reports a write the server refused
        except BaseException:
            _unlink_quietly(fd, name)
            raise
        return name

    def _unlink(self, dirs: Sequence[str], name: str, key: str) -> None:
        try:
            fd = self._open_dirs(dirs, create=False)
            if fd is None:
                return
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                pass
            finally:
                os.close(fd)
        except OSError as exc:
            raise self._fail(f"deleting {key}", exc) from None

    # -- listings ---------------------------------------------------------------------------
    def _listing(self, prefix: str,
                 wanted: Callable[[str], bool]) -> Generator[StoredObject, None, None]:
        head = prefix.rpartition("/")[0]
        dirs = key_parts(head) if head else []
        try:
            fd = self._open_dirs(dirs, create=False)
            if fd is None:
                return
            yield from self._walk(fd, f"{head}/" if head else "", prefix, wanted, len(dirs))
        except OSError as exc:
            raise self._fail(f"listing {prefix or 'the directory'}", exc) from None

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

    # -- errors -----------------------------------------------------------------------------
    def _fail(self, what: str, exc: OSError) -> CairnError:
        reason = exc.strerror or str(exc)
        if exc.errno in _FULL:
            return StorageFull(f"the directory target at {self.root} is full ({reason}) "
                               f"while {what}: free space there or raise its quota")
        if exc.errno in _AWAY:
            return StorageUnavailable(f"the directory target at {self.root} refused {what}: "
                                      f"{reason} (not mounted, read-only, or not this "
                                      "process's to write?)")
        log.warning("directory target at %s: %s failed: %s", self.root, what, exc)
        return StorageError(f"the directory target at {self.root} failed {what}: {reason}")

    def _foreign(self, where: str, mode: int, expected: str = "a file") -> DataCorrupt:
        """`where`: the path below the root, where Cairn keeps `expected` and finds
        something else."""
        log.warning("directory target at %s: %s is a %s, not %s Cairn made", self.root,
                    where, _kind(mode), expected)
        return DataCorrupt(f"{where} in the directory target at {self.root} is a "
                           f"{_kind(mode)}, not {expected} Cairn made: it was replaced "
                           "outside Cairn, and is neither followed nor read")

    def _too_large(self, key: str, size: str, limit: int) -> DataCorrupt:
        log.warning("directory target at %s: %s holds %s; at most %d expected", self.root,
                    key, size, limit)
        return DataCorrupt(f"the file {key} of the directory target at {self.root} is {size}, "
                           f"more than the {limit} it can legitimately hold: it was replaced "
                           "or appended to outside Cairn")


def _is_blob(name: str) -> bool:
    return not name.startswith(".")


def _is_temporary(name: str) -> bool:
    return _TEMPORARY_NAME.match(name) is not None


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    return "special file (FIFO, socket or device)"


def _unlink_quietly(fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=fd)
    except OSError:
        log.warning("could not remove the temporary file %s of a directory target", name,
                    exc_info=True)
