"""The file service's work (cairn-files, worker/files/app.py serves it): a restore point's
partitions, directories, files, archives of them, searches, and one file's versions
across restore points, read through a parser session (worker/files/session.py) over the
restore point's reader (`DataPath.reader`).

Opening a restore point costs its manifest, an open image or store, and a sandboxed
parser process; a tenant browsing reads the same one many times in a row. So a restore
point is opened once, on its first request, and kept (`SessionTable`): closed after
`files_idle_seconds` without a request, or sooner when `files_sessions` are open and
another is asked for (the least recently used idle one). When every open one is in use, a
request for another is refused at once (503, Retry-After) rather than queued: a client
retries, a queue would hold connections and memory for nobody. One project's requests
are bounded (`files_per_project`, 429) below that, so one tenant never holds them all.

A restore point deleted while it is read fails its reads with DataCorrupt (its blocks are
gone); what it means is the row's to say: not `available` any more is 404 ("deleted while
being read", and it is closed), still `available` is damage (409 restore_point_damaged)."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from services.errors import (
    CairnError,
    DataCorrupt,
    FileServiceUnavailable,
    FilesUnreadable,
    IsADirectory,
    ParserLimitExceeded,
    PathNotFound,
    RestorePointBusy,
    RestorePointDamaged,
    RestorePointNotFound,
    TooManyRequests,
)
from services.records.restore_points import RestorePoint
from services.settings import Settings
from services.status import RestorePointStatus
from worker.files import archive
from worker.files.calls import Entry, ParserCalls
from worker.files.content import prefetched
from worker.files.headers import ByteRange, byte_range, content_disposition, entity_tag
from worker.files.stream import Coalescing, Produced, Put
from worker.runtime import Runtime
from worker.targets import data_path_of
from worker.targets.reader import RestorePointReader

log = logging.getLogger(__name__)

ARCHIVE_WINDOW = 8
"""Pieces of an archive (up to 256 KiB each) written ahead of the client."""


class Opened(NamedTuple):
    """One open restore point: its reader, and the parser session reading it."""

    reader: RestorePointReader
    calls: ParserCalls


class RestorePoints(Protocol):
    """Where the service finds restore points and opens them."""

    def open(self, restore_point_id: str) -> Opened:
        """RestorePointNotFound, RestorePointBusy (not `available`), DataCorrupt (its
        manifest or data gone)."""

    def status(self, restore_point_id: str) -> RestorePointStatus | None:
        """The row's status now; None when there is no row."""


class StoredRestorePoints:
    """Restore points as the worker reads them: the row from the database, its target's
    data path's reader, and a parser session over that reader."""

    def __init__(self, rt: Runtime, parser: Callable[[RestorePointReader], ParserCalls],
                 cache_bytes: int) -> None:
        self.rt = rt
        self.parser = parser
        self.cache_bytes = cache_bytes

    def _row(self, restore_point_id: str) -> RestorePoint | None:
        with self.rt.db.reading() as session:
            rp = session.get(RestorePoint, restore_point_id)
            session.expunge_all()
        return rp

    def open(self, restore_point_id: str) -> Opened:
        rp = self._row(restore_point_id)
        if rp is None or rp.status in (RestorePointStatus.DELETED, RestorePointStatus.DELETING):
            raise RestorePointNotFound(f"restore point {restore_point_id} not found",
                                       restore_point_id=restore_point_id)
        if rp.status != RestorePointStatus.AVAILABLE:
            raise RestorePointBusy(
                f"restore point {rp.id} is {rp.status}; only an available restore point's "
                "files can be read", restore_point_id=rp.id, status=rp.status)
        reader = data_path_of(self.rt.settings, rp.target).reader(
            self.rt, rp, cache_bytes=self.cache_bytes)
        try:
            return Opened(reader, self.parser(reader))
        except BaseException:
            reader.close()
            raise

    def status(self, restore_point_id: str) -> RestorePointStatus | None:
        rp = self._row(restore_point_id)
        return None if rp is None else rp.status


def _close(opened: Opened, restore_point_id: str) -> None:
    for step in (opened.calls.close, opened.reader.close):
        try:
            step()
        except Exception:
            log.exception("closing restore point %s", restore_point_id)


@dataclass
class _Open:
    restore_point_id: str
    ready: threading.Event = field(default_factory=threading.Event)
    opened: Opened | None = None
    error: BaseException | None = None
    users: int = 1
    idle_since: float = 0.0
    doomed: bool = False
    """Taken out of the table (its restore point is gone): closed when its last user ends."""


class SessionTable:
    """The open restore points, by id: at most `capacity`, each closed once idle for
    `idle_seconds`. Safe to use from many threads; a restore point is opened by the first
    request that asks for it while the others asking wait for that opening."""

    def __init__(self, points: RestorePoints, *, capacity: int, idle_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.points = points
        self.capacity = capacity
        self.idle_seconds = idle_seconds
        self.clock = clock
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def using(self, restore_point_id: str) -> Iterator[Opened]:
        """The open restore point, held (never closed) until the block ends."""
        entry = self._take(restore_point_id)
        try:
            assert entry.opened is not None
            yield entry.opened
        finally:
            self._give_back(entry)

    def open_ids(self) -> list[str]:
        """The restore points open now, least recently used first."""
        with self._lock:
            return list(self._open)

    def _take(self, restore_point_id: str) -> _Open:
        full = False
        with self._lock:
            closing = self._expired()
            entry = self._open.get(restore_point_id)
            if entry is not None:
                entry.users += 1
                self._open.move_to_end(restore_point_id)
                opener = False
            else:
                if len(self._open) >= self.capacity:
                    victim = next((e for e in self._open.values()
                                   if e.users == 0 and e.ready.is_set()), None)
                    if victim is None:
                        full = True
                    else:
                        del self._open[victim.restore_point_id]
                        closing.append(victim)
                if not full:
                    entry = self._open[restore_point_id] = _Open(restore_point_id)
                    opener = True
        self._close_each(closing)  # outside the lock: closing waits for the parser's end
        if full or entry is None:
            raise FileServiceUnavailable(
                f"the file service has {self.capacity} restore points open, all of them in "
                "use; retry in a few seconds")
        if opener:
            try:
                entry.opened = self.points.open(restore_point_id)
            except BaseException as error:
                entry.error = error
                with self._lock:
                    if self._open.get(restore_point_id) is entry:
                        del self._open[restore_point_id]
                entry.ready.set()
                raise
            entry.ready.set()
            return entry
        entry.ready.wait()
        if entry.error is not None:
            self._give_back(entry)
            raise entry.error
        return entry

    def _give_back(self, entry: _Open) -> None:
        with self._lock:
            entry.users -= 1
            entry.idle_since = self.clock()
            last = entry.doomed and entry.users == 0
        if last:
            self._close_each([entry])

    def discard(self, restore_point_id: str) -> None:
        """Take the restore point out of the table: closed now if nobody uses it, else
        when its last user ends; the next request opens it again (or finds it gone)."""
        with self._lock:
            entry = self._open.pop(restore_point_id, None)
            if entry is None:
                return
            entry.doomed = True
            now = entry.users == 0
        if now:
            self._close_each([entry])

    def reap(self) -> None:
        """Close the restore points idle for `idle_seconds`."""
        with self._lock:
            closing = self._expired()
        self._close_each(closing)

    def close(self) -> None:
        """Close every restore point (the process is ending)."""
        with self._lock:
            closing = list(self._open.values())
            self._open.clear()
        self._close_each(closing)

    def _expired(self) -> list[_Open]:
        """Idle ones past their time, out of the table (the caller holds the lock and
        closes them after releasing it)."""
        now = self.clock()
        expired = [e for e in self._open.values() if e.users == 0 and e.ready.is_set()
                   and now - e.idle_since >= self.idle_seconds]
        for entry in expired:
            del self._open[entry.restore_point_id]
        return expired

    def _close_each(self, entries: list[_Open]) -> None:
        for entry in entries:
            if entry.opened is not None:
                _close(entry.opened, entry.restore_point_id)
                entry.opened = None


class ProjectSlots:
    """Requests each project has running, at most `per_project` at once."""

    def __init__(self, per_project: int) -> None:
        self.per_project = per_project
        self._running: dict[str, int] = {}
        self._lock = threading.Lock()

    @contextmanager
    def holding(self, project: str) -> Iterator[None]:
        with self._lock:
            running = self._running.get(project, 0)
            if running >= self.per_project:
                raise TooManyRequests(
                    f"project {project} has {running} file requests running, the most it "
                    "may; retry when one has ended", retry_after=1)
            self._running[project] = running + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._running[project] - 1
                if left:
                    self._running[project] = left
                else:
                    del self._running[project]


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
