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
paths are named and opened as `file_tree.py` says (plain names only, nothing followed out
of the directory, no FIFO or device opened), and every read names the most its blob can
hold: a longer file is refused (DataCorrupt) without the rest being read.

Unlike an S3 read, a read here cannot be bounded in time: an NFS server that stops
answering holds the reading thread for as long as the mount's own options say
(docs/operations.md, "Directory targets")."""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

from typing_extensions import Buffer

from services.errors import CairnError, DataCorrupt, StorageError, StorageFull, StorageUnavailable
from services.storage.chunk_backend import StoredObject
from services.storage.file_tree import FileTree, key_parts

log = logging.getLogger(__name__)

_TEMPORARY = ".tmp."
_TEMPORARY_NAME = re.compile(r"^\.tmp\.[0-9a-f]{32}$")
_FILE_MODE = 0o640
_READ_PIECE = 1 << 20
_FULL = {errno.ENOSPC, errno.EDQUOT}
_AWAY = {errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EROFS, errno.ESTALE,
         errno.EIO, errno.ENOTCONN, errno.ETIMEDOUT, errno.EHOSTDOWN, errno.EHOSTUNREACH,
         errno.ENETUNREACH, errno.ENODEV, errno.ENXIO}
"""Errors of a mount that is gone, stale, read-only or not this process's to write: the
job can be tried again once the operator has seen to it."""


class Directory:
    """Thread-safe: every call opens what it needs and closes it."""

    where = "directory"

    def __init__(self, root: Path) -> None:
        self.root = root
        self._tree = FileTree(root)

    # -- the ChunkBackend -------------------------------------------------------------------
    def put(self, key: str, data: Buffer) -> None:
        with self._staged(key, data) as (fd, name, temporary):
            try:
                os.rename(temporary, name, src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:
                _unlink_quietly(fd, temporary)
                raise

    def put_new(self, key: str, data: bytes) -> bool:
        """Writes the file only if there is none under `key` (link(2) decides, atomically,
        on a local file system and over NFS alike); False when one is there already."""
        with self._staged(key, data) as (fd, name, temporary):
            try:
                try:
                    os.link(temporary, name, src_dir_fd=fd, dst_dir_fd=fd,
                            follow_symlinks=False)
                    made = True
                except FileExistsError:
                    # Over NFS a LINK whose answer was lost is sent again, and the second
                    # answers "exists" for the link the first one made: the temporary
                    # file's link count says whose it is (open(2), O_EXCL).
                    made = os.stat(temporary, dir_fd=fd, follow_symlinks=False).st_nlink == 2
            finally:
                _unlink_quietly(fd, temporary)
        return made

    @contextmanager
    def _staged(self, key: str, data: Buffer) -> Generator[tuple[int, str, str], None, None]:
        """`key`'s directory (made when missing), the file's name in it, and `data` in a
        temporary file beside it, synced: the caller moves it into place; the directory is
        then synced too, and closed. An OSError leaves as the target's error."""
        *dirs, name = key_parts(key)
        try:
            fd = self._tree.open_dirs(dirs, create=True)
            assert fd is not None
            try:
                yield fd, name, self._write_temporary(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise self._fail(f"writing {key}", exc) from None

    def get(self, key: str, *, limit: int) -> bytes | None:
        """The file's bytes, None when there is none. `limit`: the most it can legitimately
        hold; a longer one is refused with DataCorrupt and the rest of it is never read."""
        *dirs, name = key_parts(key)
        try:
            fd = self._tree.open_dirs(dirs, create=False)
            if fd is None:
                return None
            try:
                file = self._tree.open_file(fd, name, key)
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
            fd = self._tree.open_dirs(dirs, create=False)
            if fd is None:
                return None
            try:
                return self._tree.size(fd, name, key)
            finally:
                os.close(fd)
        except OSError as exc:
            raise self._fail(f"looking up {key}", exc) from None

    def delete(self, key: str) -> None:
        """Removes the file; one already gone is no error. The directory is not fsynced:
        a removal a crash undoes leaves garbage the next collection or orphan scan finds
        again, never a blob that is missing."""
        *dirs, name = key_parts(key)
        self._unlink(dirs, name, key)

    def holds_any(self, prefix: str) -> bool:
        with closing(self._listing(prefix, _is_blob)) as found:
            return next(found, None) is not None

    def list(self, prefix: str = "", *, deadline: float, most: int | None = None
             ) -> Iterator[StoredObject]:
        """Every file whose key starts with `prefix`, in key order; no temporary file, and
        nothing that is not a regular file (logged, left alone). Refused (StorageError)
        once an entry comes past `deadline`; `most` asks nothing of a walk, which has no
        pages (a file system cannot make one list nothing for ever)."""
        return _until(self._listing(prefix, _is_blob), deadline, self.root)

    def close(self) -> None:
        """Nothing is held between calls."""

    # -- for the directory target ----------------------------------------------------------
    def check(self) -> None:
        """Raises StorageUnavailable unless the path is a directory this process may write
        in, on a file system mounted read-write."""
        try:
            fd = self._tree.open_root()
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

    def temporaries(self, *, deadline: float) -> Iterator[StoredObject]:
        """The temporary files of writes that never finished (their process was killed
        between its write and its rename), anywhere under the directory; refused
        (StorageError) once an entry comes past `deadline`, as `list` is."""
        return _until(self._listing("", _is_temporary), deadline, self.root)

    def remove_temporary(self, key: str) -> None:
        """Removes one of `temporaries()`; refuses any other key."""
        *dirs, name = key.split("/")
        if not _TEMPORARY_NAME.match(name):
            raise StorageError(f"{key!r} is not a temporary file of a directory target")
        if dirs:
            key_parts("/".join(dirs))
        self._unlink(dirs, name, key)

    # -- files ------------------------------------------------------------------------------
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

    def _write_temporary(self, fd: int, data: Buffer) -> str:
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
            fd = self._tree.open_dirs(dirs, create=False)
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

    def _listing(self, prefix: str,
                 wanted: Callable[[str], bool]) -> Generator[StoredObject, None, None]:
        try:
            yield from self._tree.listing(prefix, wanted)
        except OSError as exc:
            raise self._fail(f"listing {prefix or 'the directory'}", exc) from None

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

    def _too_large(self, key: str, size: str, limit: int) -> DataCorrupt:
        log.warning("directory target at %s: %s holds %s; at most %d expected", self.root,
                    key, size, limit)
        return DataCorrupt(f"the file {key} of the directory target at {self.root} is {size}, "
                           f"more than the {limit} it can legitimately hold: it was replaced "
                           "or appended to outside Cairn")


def _until(listing: Generator[StoredObject, None, None], deadline: float, root: Path
           ) -> Iterator[StoredObject]:
    with closing(listing):
        for stored in listing:
            if time.monotonic() > deadline:
                raise StorageError(f"the listing of the directory target at {root} did not "
                                   "end by its deadline")
            yield stored


def _is_blob(name: str) -> bool:
    return not name.startswith(".")


def _is_temporary(name: str) -> bool:
    return _TEMPORARY_NAME.match(name) is not None


def _unlink_quietly(fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=fd)
    except OSError:
        log.warning("could not remove the temporary file %s of a directory target", name,
                    exc_info=True)
