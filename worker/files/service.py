"""The file service's work (cairn-files, worker/files/app.py serves it): a restore point's
partitions, directories, files, archives of them, searches, and one file's versions
across restore points, read through a parser session (worker/files/session.py) over the
restore point's reader (`DataPath.reader`).

A restore point is opened once, on its first request, and kept open a while
(`open_points.SessionTable`); one project's requests are bounded (`ProjectSlots`).

A restore point deleted while it is read fails its reads with DataCorrupt (its blocks are
gone); what it means is the row's to say: not `available` any more is 404 ("deleted while
being read", and it is closed), still `available` is damage (409 restore_point_damaged)."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from services.errors import (
    CairnError,
    DataCorrupt,
    FileServiceUnavailable,
    FilesUnreadable,
    IsADirectory,
    ParserLimitExceeded,
    PathNotFound,
    RestorePointDamaged,
    RestorePointNotFound,
    TooManyRequests,
)
from services.settings import Settings
from services.status import RestorePointStatus
from worker.files import archive
from worker.files.calls import Entry
from worker.files.content import prefetched
from worker.files.headers import ByteRange, byte_range, content_disposition, entity_tag
from worker.files.open_points import Opened, ProjectSlots, RestorePoints, SessionTable
from worker.files.stream import Coalescing, Produced, Put

log = logging.getLogger(__name__)

ARCHIVE_WINDOW = 8
"""Pieces of an archive (up to 256 KiB each) written ahead of the client."""


@dataclass(frozen=True)
class FileLimits:
    sessions: int = 16
    idle_seconds: float = 60.0
    per_project: int = 4
    hash_max_bytes: int = 256 << 20
    version_threads: int = 4
    search_max_visits: int = 100_000
    archive_max_entries: int = 100_000
    archive_max_bytes: int = 64 << 30

    @classmethod
    def from_settings(cls, settings: Settings) -> FileLimits:
        return cls(sessions=settings.files_sessions, idle_seconds=settings.files_idle_seconds,
                   per_project=settings.files_per_project,
                   hash_max_bytes=settings.files_hash_max_bytes,
                   version_threads=settings.files_version_threads,
                   search_max_visits=settings.files_search_max_visits,
                   archive_max_entries=settings.files_archive_max_entries,
                   archive_max_bytes=settings.files_archive_max_bytes)


class Body:
    """A download's bytes: the first piece already read (so a failure before it is an
    error status, not a cut connection), the rest as the producer makes them. `close`
    (at the end, or when the client goes) stops the producer, then releases the restore
    point and the project's slot."""

    def __init__(self, first: bytes | None, rest: Iterator[bytes], release: ExitStack,
                 on_error: Callable[[BaseException], None]) -> None:
        self._first = first
        self._rest = rest
        self._release = release
        self._on_error = on_error

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        try:
            return next(self._rest)
        except StopIteration:
            raise
        except BaseException as error:
            self._on_error(error)
            raise

    def close(self) -> None:
        self._release.close()


@dataclass
class Download:
    status: int
    headers: dict[str, str]
    media_type: str
    body: Body


class FileService:
    def __init__(self, points: RestorePoints, limits: FileLimits,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.points = points
        self.limits = limits
        self.table = SessionTable(points, capacity=limits.sessions,
                                  idle_seconds=limits.idle_seconds, clock=clock)
        self.slots = ProjectSlots(limits.per_project)
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None

    # ------------------------------------------------------------------ life
    def start(self) -> None:
        """Close idle restore points from a thread of its own, a few times per idle time."""
        period = min(5.0, self.limits.idle_seconds / 4)

        def reap() -> None:
            while not self._stop.wait(period):
                try:
                    self.table.reap()
                except Exception:
                    log.exception("closing idle restore points")

        self._reaper = threading.Thread(target=reap, name="cairn-files reaper", daemon=True)
        self._reaper.start()

    def close(self) -> None:
        self._stop.set()
        if self._reaper is not None:
            self._reaper.join()
        self.table.close()

    # ------------------------------------------------------------------ reads
    def partitions(self, project: str, restore_point_id: str) -> dict[str, Any]:
        with self.slots.holding(project), self._reading(restore_point_id) as opened:
            return {"restore_point_id": restore_point_id,
                    "partitions": opened.calls.partitions()}

    def listing(self, project: str, restore_point_id: str, partition: int | None,
                path: str, marker: str | None, limit: int) -> dict[str, Any]:
        with self.slots.holding(project), self._reading(restore_point_id) as opened:
            return opened.calls.list(partition, path, marker, limit)

    def stat(self, project: str, restore_point_id: str, partition: int | None,
             path: str) -> Entry:
        with self.slots.holding(project), self._reading(restore_point_id) as opened:
            return opened.calls.stat(partition, path)

    def search(self, project: str, restore_point_id: str, partition: int | None, path: str,
               pattern: str, limit: int) -> dict[str, Any]:
        with self.slots.holding(project), self._reading(restore_point_id) as opened:
            return opened.calls.search(partition, path, pattern, limit,
                                       self.limits.search_max_visits)

    def versions(self, project: str, restore_point_ids: list[str], partition: int | None,
                 path: str) -> dict[str, Any]:
        """The file at `path` in each restore point, in the order given, read a few
        restore points at once: whether it is there, what it is, and the sha256 of a file
        up to `hash_max_bytes`. A restore point that cannot answer says why in `reason`."""
        with self.slots.holding(project):
            threads = max(1, min(self.limits.version_threads, len(restore_point_ids)))
            with ThreadPoolExecutor(threads, thread_name_prefix="cairn-files versions") as pool:
                found = list(pool.map(lambda rp: self._version(rp, partition, path),
                                      restore_point_ids))
        return {"path": path, "partition": partition, "versions": found}

    def _version(self, restore_point_id: str, partition: int | None,
                 path: str) -> dict[str, Any]:
        version: dict[str, Any] = {"restore_point_id": restore_point_id, "present": False,
                                   "type": None, "size": None, "mtime": None, "sha256": None,
                                   "reason": None}
        try:
            with self._reading(restore_point_id) as opened:
                entry = opened.calls.stat(partition, path)
                version.update(present=True, type=entry.get("type"), size=entry.get("size"),
                               mtime=entry.get("mtime"))
                size = int(entry.get("size") or 0)
                if entry.get("type") == "file" and size <= self.limits.hash_max_bytes:
                    digest = hashlib.sha256()
                    with prefetched(opened.calls, opened.reader, partition, path, size, 0,
                                    size) as pieces:
                        for piece in pieces:
                            digest.update(piece)
                    version["sha256"] = digest.hexdigest()
        except PathNotFound:
            pass
        except (FileServiceUnavailable, TooManyRequests):
            raise  # the whole answer is retried, not shown with holes
        except CairnError as error:
            version["reason"] = error.message
        return version

    # ------------------------------------------------------------------ downloads
    def download(self, project: str, restore_point_id: str, partition: int | None,
                 path: str, *, range_header: str | None = None,
                 if_range: str | None = None) -> Download:
        """One regular file, whole (200) or the one range asked for (206);
        RangeNotSatisfiable (416) for a range past its end."""
        with ExitStack() as stack:
            stack.enter_context(self.slots.holding(project))
            opened = stack.enter_context(self._reading(restore_point_id))
            entry = opened.calls.stat(partition, path)
            kind = entry.get("type")
            if kind == "dir":
                raise IsADirectory(f"{path} is a directory: download it as an archive",
                                   path=path)
            if kind != "file":
                raise FilesUnreadable(f"{path} is not a regular file ({kind}): it has no "
                                      "content to download", path=path)
            size = int(entry.get("size") or 0)
            etag = entity_tag(restore_point_id, partition, path, size, entry.get("mtime"))
            wanted = byte_range(range_header, size, if_range=if_range, etag=etag)
            part = wanted or ByteRange(0, size, size)
            headers = {"Content-Length": str(part.length), "Accept-Ranges": "bytes",
                       "ETag": etag,
                       "Content-Disposition": content_disposition(path.rsplit("/", 1)[-1])}
            if wanted is not None:
                headers["Content-Range"] = wanted.content_range
            if entry.get("mtime"):
                headers["X-Cairn-Mtime"] = str(entry["mtime"])
            pieces = stack.enter_context(prefetched(opened.calls, opened.reader, partition,
                                                    path, size, part.start, part.end))
            body = self._body(restore_point_id, pieces, stack)
            return Download(206 if wanted is not None else 200, headers,
                            "application/octet-stream", body)
        raise AssertionError("unreachable")  # pragma: no cover (mypy: with may swallow)

    def archive(self, project: str, restore_point_id: str, partition: int | None,
                paths: list[str], fmt: archive.Format) -> Download:
        """The paths and everything under them as one tar or zip, streamed."""
        with ExitStack() as stack:
            stack.enter_context(self.slots.holding(project))
            opened = stack.enter_context(self._reading(restore_point_id))
            walks = []
            for path in paths:
                walked = opened.calls.walk(partition, path, self.limits.archive_max_entries)
                if walked.get("truncated"):
                    raise ParserLimitExceeded(
                        f"{path} holds more than {self.limits.archive_max_entries} entries: "
                        "download a directory further down", limit="entries", path=path)
                walks.append((path, list(walked.get("entries", []))))
            chosen = archive.members(walks, fmt, max_entries=self.limits.archive_max_entries,
                                     max_bytes=self.limits.archive_max_bytes)
            write = archive.write_tar if fmt == "tar" else archive.write_zip

            def contents(member: archive.Member) -> AbstractContextManager[Iterator[bytes]]:
                return prefetched(opened.calls, opened.reader, partition, member.path,
                                  member.size, 0, member.size)

            def produce(put: Put) -> None:
                sink = Coalescing(put)
                write(chosen, sink, contents)
                sink.flush()

            pieces = stack.enter_context(Produced(produce, window=ARCHIVE_WINDOW,
                                                  name="cairn-files archive"))
            headers = {"Content-Disposition": content_disposition(
                f"{_archive_stem(restore_point_id, paths)}.{fmt}")}
            body = self._body(restore_point_id, pieces, stack)
            return Download(200, headers, archive.MEDIA_TYPES[fmt], body)
        raise AssertionError("unreachable")  # pragma: no cover

    def _body(self, restore_point_id: str, pieces: Produced, stack: ExitStack) -> Body:
        """The first piece read now (inside `stack`: a failure is the request's error),
        then everything `stack` holds handed to the body to release."""
        first = next(pieces, None)

        def on_error(error: BaseException) -> None:
            if isinstance(error, DataCorrupt | RestorePointDamaged):
                error = self._damaged(restore_point_id, error)
            log.warning("restore point %s: a download ended early: %s", restore_point_id,
                        getattr(error, "message", error))

        return Body(first, pieces, stack.pop_all(), on_error)

    # ------------------------------------------------------------------ damage
    @contextmanager
    def _reading(self, restore_point_id: str) -> Iterator[Opened]:
        """The restore point open for the block; its DataCorrupt or RestorePointDamaged
        (what the parser session makes of one) as the row explains it."""
        try:
            with self.table.using(restore_point_id) as opened:
                yield opened
        except (DataCorrupt, RestorePointDamaged) as error:
            raise self._damaged(restore_point_id, error) from None

    def _damaged(self, restore_point_id: str, error: CairnError) -> CairnError:
        try:
            status = self.points.status(restore_point_id)
        except Exception:
            log.exception("restore point %s: reading its status after %s", restore_point_id,
                          error.code)
            status = RestorePointStatus.AVAILABLE
        if status != RestorePointStatus.AVAILABLE:
            self.table.discard(restore_point_id)
            return RestorePointNotFound(
                f"restore point {restore_point_id} was deleted while being read",
                restore_point_id=restore_point_id)
        if isinstance(error, RestorePointDamaged):
            return error
        return RestorePointDamaged(
            f"restore point {restore_point_id} is damaged: {error.message} (verify it, "
            "or read another restore point)", restore_point_id=restore_point_id)


def _archive_stem(restore_point_id: str, paths: list[str]) -> str:
    names = [path.rstrip("/").rsplit("/", 1)[-1] for path in paths]
    if len(names) == 1 and names[0]:
        return names[0]
    return f"restore-point-{restore_point_id[:8]}"
