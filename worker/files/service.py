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
from worker.files.content import prefetched, volume_bound, within
from worker.files.deadlines import Late, Stop
from worker.files.downloads import Body, Download
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
    project_sessions: int | None = None
    """Open restore points one project uses at once (None: a quarter of `sessions`)."""
    download_min_bytes_per_second: int = 16 << 10
    download_grace_seconds: float = 60.0
    download_max_seconds: float = 6 * 3600.0
    archive_walk_seconds: float = 60.0
    versions_seconds: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> FileLimits:
        return cls(sessions=settings.files_sessions, idle_seconds=settings.files_idle_seconds,
                   per_project=settings.files_per_project,
                   hash_max_bytes=settings.files_hash_max_bytes,
                   version_threads=settings.files_version_threads,
                   search_max_visits=settings.files_search_max_visits,
                   archive_max_entries=settings.files_archive_max_entries,
                   archive_max_bytes=settings.files_archive_max_bytes,
                   project_sessions=settings.files_project_sessions,
                   download_min_bytes_per_second=settings.files_download_min_bytes_per_second,
                   download_grace_seconds=settings.files_download_grace_seconds,
                   download_max_seconds=settings.files_download_max_seconds,
                   archive_walk_seconds=settings.files_archive_walk_seconds,
                   versions_seconds=settings.files_versions_seconds)


class FileService:
    def __init__(self, points: RestorePoints, limits: FileLimits,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.points = points
        self.limits = limits
        self.table = SessionTable(points, capacity=limits.sessions,
                                  idle_seconds=limits.idle_seconds,
                                  project_sessions=limits.project_sessions, clock=clock)
        self.slots = ProjectSlots(limits.per_project)
        self.clock = clock
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None
        self._downloads: set[Body] = set()
        self._downloads_lock = threading.Lock()

    # ------------------------------------------------------------------ life
    def start(self) -> None:
        """Close idle restore points from a thread of its own, a few times per idle time."""
        period = min(5.0, self.limits.idle_seconds / 4)

        def reap() -> None:
            while not self._stop.wait(period):
                try:
                    self.table.reap()
                    self.end_stalled_downloads()
                except Exception:
                    log.exception("closing idle restore points")

        self._reaper = threading.Thread(target=reap, name="cairn-files reaper", daemon=True)
        self._reaper.start()

    def close(self) -> None:
        self._stop.set()
        if self._reaper is not None:
            self._reaper.join()
        self.table.close()

    def end_stalled_downloads(self) -> list[Body]:
        """Ends the downloads past `download_max_seconds`, or slower on average than
        `download_min_bytes_per_second` past their grace: a client that stopped reading
        would otherwise hold its restore point open for ever. The ones ended."""
        now = self.clock()
        limits = self.limits
        with self._downloads_lock:
            downloads = list(self._downloads)
        ended = []
        for body in downloads:
            lasted = now - body.started
            if lasted > limits.download_max_seconds:
                why = f"it lasted more than {limits.download_max_seconds:g} s"
            elif (lasted > limits.download_grace_seconds
                  and body.sent < limits.download_min_bytes_per_second * lasted):
                why = (f"the client read {body.sent} bytes in {lasted:.0f} s, below "
                       f"{limits.download_min_bytes_per_second} bytes a second")
            else:
                continue
            log.warning("a download was ended: %s", why)
            body.end(why)
            ended.append(body)
        return ended

    # ------------------------------------------------------------------ reads
    def partitions(self, project: str, restore_point_id: str) -> dict[str, Any]:
        with self.slots.holding(project), self._reading(restore_point_id,
                                                        project) as opened:
            return {"restore_point_id": restore_point_id,
                    "partitions": opened.calls.partitions()}

    def listing(self, project: str, restore_point_id: str, partition: int | None,
                path: str, marker: str | None, limit: int) -> dict[str, Any]:
        with self.slots.holding(project), self._reading(restore_point_id,
                                                        project) as opened:
            return opened.calls.list(partition, path, marker, limit)

    def stat(self, project: str, restore_point_id: str, partition: int | None,
             path: str) -> Entry:
        with self.slots.holding(project), self._reading(restore_point_id,
                                                        project) as opened:
            return opened.calls.stat(partition, path)

    def search(self, project: str, restore_point_id: str, partition: int | None, path: str,
               pattern: str, limit: int) -> dict[str, Any]:
        with self.slots.holding(project), self._reading(restore_point_id,
                                                        project) as opened:
            return opened.calls.search(partition, path, pattern, limit,
                                       self.limits.search_max_visits)

    def versions(self, project: str, restore_point_ids: list[str], partition: int | None,
                 path: str, cancelled: threading.Event | None = None) -> dict[str, Any]:
        """The file at `path` in each restore point, in the order given, read a few
        restore points at once (no more than the project's share of open restore points):
        whether it is there, what it is, and the sha256 of a file up to `hash_max_bytes`.
        A restore point that cannot answer says why in `reason`; so do those not read
        within `versions_seconds` or once the client has gone (`cancelled`)."""
        stop = Stop(self.limits.versions_seconds, cancelled)
        with self.slots.holding(project):
            threads = max(1, min(self.limits.version_threads, self.table.project_sessions,
                                 len(restore_point_ids)))
            with ThreadPoolExecutor(threads, thread_name_prefix="cairn-files versions") as pool:
                found = list(pool.map(
                    lambda rp: self._version(project, rp, partition, path, stop),
                    restore_point_ids))
        return {"path": path, "partition": partition, "versions": found}

    def _version(self, project: str, restore_point_id: str, partition: int | None,
                 path: str, stop: Stop) -> dict[str, Any]:
        version: dict[str, Any] = {"restore_point_id": restore_point_id, "present": False,
                                   "type": None, "size": None, "mtime": None, "sha256": None,
                                   "reason": None}
        try:
            stop.check()
            with self._reading(restore_point_id, project, wait=stop.left(),
                               path=path) as opened:
                stop.check()
                entry = opened.calls.stat(partition, path)
                version.update(present=True, type=entry.get("type"), size=entry.get("size"),
                               mtime=entry.get("mtime"))
                size = int(entry.get("size") or 0)
                if entry.get("type") == "file":
                    within(volume_bound(opened.calls, opened.reader, partition), path, size)
                if entry.get("type") == "file" and size <= self.limits.hash_max_bytes:
                    digest = hashlib.sha256()
                    with prefetched(opened.calls, opened.reader, partition, path, size, 0,
                                    size) as pieces:
                        for piece in pieces:
                            stop.check()
                            digest.update(piece)
                    version["sha256"] = digest.hexdigest()
        except PathNotFound:
            pass
        except Late as late:
            version["reason"] = str(late)
        except (FileServiceUnavailable, TooManyRequests):
            if stop.left() > 0:
                raise  # the whole answer is retried, not shown with holes
            version["reason"] = (f"not read within the request's {stop.seconds:g} s: ask "
                                 "for fewer restore points")
        except CairnError as error:
            version["reason"] = error.message
        except Exception:
            # Never a 500 for one restore point: what failed is logged, the answer says so.
            log.exception("restore point %s: the version of %s", restore_point_id, path)
            version["reason"] = _internal_reason(restore_point_id, path)
        return version

    # ------------------------------------------------------------------ downloads
    def download(self, project: str, restore_point_id: str, partition: int | None,
                 path: str, *, range_header: str | None = None,
                 if_range: str | None = None) -> Download:
        """One regular file, whole (200) or the one range asked for (206);
        RangeNotSatisfiable (416) for a range past its end."""
        with ExitStack() as stack:
            stack.enter_context(self.slots.holding(project))
            opened = stack.enter_context(self._reading(restore_point_id, project, path=path))
            entry = opened.calls.stat(partition, path)
            kind = entry.get("type")
            if kind == "dir":
                raise IsADirectory(f"{path} is a directory: download it as an archive",
                                   path=path)
            if kind != "file":
                raise FilesUnreadable(f"{path} is not a regular file ({kind}): it has no "
                                      "content to download", path=path)
            size = int(entry.get("size") or 0)
            within(volume_bound(opened.calls, opened.reader, partition), path, size)
            etag = entity_tag(restore_point_id, partition, path, size, entry.get("mtime"))
            wanted = byte_range(range_header, size, if_range=if_range, etag=etag)
            part = wanted or ByteRange(0, size, size)
            headers = {"Content-Length": str(part.length), "Accept-Ranges": "bytes",
                       "ETag": etag,
                       "Content-Disposition": content_disposition(path.rsplit("/", 1)[-1])}
            if wanted is not None:
                headers["Content-Range"] = wanted.content_range
            pieces = stack.enter_context(prefetched(opened.calls, opened.reader, partition,
                                                    path, size, part.start, part.end))
            body = self._body(restore_point_id, pieces, stack)
            return Download(206 if wanted is not None else 200, headers,
                            "application/octet-stream", body)
        raise AssertionError("unreachable")  # pragma: no cover (mypy: with may swallow)

    def archive(self, project: str, restore_point_id: str, partition: int | None,
                paths: list[str], fmt: archive.Format,
                cancelled: threading.Event | None = None) -> Download:
        """The paths and everything under them as one tar or zip, streamed. The walks
        of the paths together end within `archive_walk_seconds`, and stop when the
        client has gone (`cancelled`)."""
        stop = Stop(self.limits.archive_walk_seconds, cancelled)
        with ExitStack() as stack:
            stack.enter_context(self.slots.holding(project))
            opened = stack.enter_context(self._reading(restore_point_id, project))
            walks = []
            for path in paths:
                try:
                    stop.check()
                except Late:
                    raise ParserLimitExceeded(
                        f"time: the archive's paths took longer than "
                        f"{self.limits.archive_walk_seconds:g} s to list: download fewer "
                        "files, or a directory further down", limit="time",
                        path=path) from None
                walked = opened.calls.walk(partition, path, self.limits.archive_max_entries)
                if walked.get("truncated"):
                    raise ParserLimitExceeded(
                        f"{path} holds more than {self.limits.archive_max_entries} entries: "
                        "download a directory further down", limit="entries", path=path)
                walks.append((path, list(walked.get("entries", []))))
            chosen = archive.members(walks, fmt, max_entries=self.limits.archive_max_entries,
                                     max_bytes=self.limits.archive_max_bytes)
            write = archive.write_tar if fmt == "tar" else archive.write_zip
            bound = volume_bound(opened.calls, opened.reader, partition)

            def contents(member: archive.Member) -> AbstractContextManager[Iterator[bytes]]:
                within(bound, member.path, member.size)
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

        body = Body(first, pieces, stack.pop_all(), on_error, started=self.clock())
        release = body._release

        def forget() -> None:
            with self._downloads_lock:
                self._downloads.discard(body)

        release.callback(forget)
        with self._downloads_lock:
            self._downloads.add(body)
        return body

    # ------------------------------------------------------------------ damage
    @contextmanager
    def _reading(self, restore_point_id: str, project: str | None = None, *,
                 wait: float = 0.0, path: str | None = None) -> Iterator[Opened]:
        """The restore point open for the block, counted as `project`'s; its DataCorrupt
        or RestorePointDamaged (what the parser session makes of one) as the row explains
        it, in a message of its own (`path`: the file read)."""
        try:
            with self.table.using(restore_point_id, project, wait=wait) as opened:
                yield opened
        except (DataCorrupt, RestorePointDamaged) as error:
            raise self._damaged(restore_point_id, error, path) from None

    def _damaged(self, restore_point_id: str, error: CairnError,
                 path: str | None = None) -> CairnError:
        """What the tenant is told of a damaged block: a fixed message naming the restore
        point (and the file); what the reader said (objects, offsets) only in the log."""
        path = path or error.details.get("path")
        log.warning("restore point %s: a damaged block%s: %s %s", restore_point_id,
                    f" reading {path}" if path else "", error.message, error.details)
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
        where = f" (reading {path})" if isinstance(path, str) else ""
        details: dict[str, Any] = {"restore_point_id": restore_point_id}
        if isinstance(path, str):
            details["path"] = path
        return RestorePointDamaged(
            f"restore point {restore_point_id} is damaged{where}: a block of it failed its "
            "check; verify it, or read another restore point", **details)


def _internal_reason(restore_point_id: str, path: str) -> str:
    return (f"restore point {restore_point_id}: {path} could not be read (an internal error; "
            "the operator's logs have details)")


def _archive_stem(restore_point_id: str, paths: list[str]) -> str:
    names = [path.rstrip("/").rsplit("/", 1)[-1] for path in paths]
    if len(names) == 1 and names[0]:
        return names[0]
    return f"restore-point-{restore_point_id[:8]}"
