"""The restore points the file service holds open (`SessionTable`), and how many requests
one project may have at once (`ProjectSlots`).

Opening a restore point costs its manifest, an open image or store, and a sandboxed
parser process; a tenant browsing reads the same one many times in a row. So a restore
point is opened once, on its first request, and kept: closed after `files_idle_seconds`
without a request, or sooner when `files_sessions` are open and another is asked for (the
least recently used idle one). When every open one is in use, a request for another is
refused at once (503, Retry-After) rather than queued: a client retries, a queue would
hold connections and memory for nobody. One project's requests are bounded
(`files_per_project`, 429) below that, and so are the restore points they hold
(`files_project_sessions`: a versions request's threads hold one each), so one tenant
never holds them all; a request waiting for one (a versions thread) is handed the last
free ones before any other project's new request."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from services.errors import (
    CairnError,
    FileServiceUnavailable,
    RestorePointNotFound,
    RestorePointNotReadable,
    TooManyRequests,
)
from services.records.restore_points import RestorePoint
from services.status import RestorePointStatus
from worker.files.calls import ParserCalls
from worker.runtime import Runtime
from worker.targets import data_path_of
from worker.targets.reader import RestorePointReader

log = logging.getLogger(__name__)


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
            raise RestorePointNotReadable(
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
    opener: bool = False
    """The request that made the entry has yet to open the restore point."""


class SessionTable:
    """The open restore points, by id: at most `capacity`, each closed once idle for
    `idle_seconds`. Safe to use from many threads; a restore point is opened by the first
    request that asks for it while the others asking wait for that opening.

    Per project: a project uses at most `project_sessions` open restore points at once
    (each thread of a versions request holds one), and one that asks for another while
    projects that wait for one are as many as the free ones is refused them: the last
    free restore points go to those waiting, never to the project that holds the most."""

    def __init__(self, points: RestorePoints, *, capacity: int, idle_seconds: float,
                 project_sessions: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.points = points
        self.capacity = capacity
        self.idle_seconds = idle_seconds
        self.project_sessions = project_sessions or max(1, capacity // 4)
        self.clock = clock
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._held: dict[str, dict[str, int]] = {}
        """Project -> the restore points its requests use now -> how many of them."""
        self._waiting: dict[str, int] = {}
        """Project -> its requests waiting for a restore point."""

    @contextmanager
    def using(self, restore_point_id: str, project: str | None = None, *,
              wait: float = 0.0) -> Iterator[Opened]:
        """The open restore point, held (never closed) until the block ends, counted as
        `project`'s. When the table or the project has no room: wait up to `wait` seconds
        for one, then FileServiceUnavailable (the table) or TooManyRequests (the project)."""
        entry = self._take(restore_point_id, project, wait)
        try:
            assert entry.opened is not None
            yield entry.opened
        finally:
            self._give_back(entry, project)

    def open_ids(self) -> list[str]:
        """The restore points open now, least recently used first."""
        with self._lock:
            return list(self._open)

    def held(self, project: str) -> int:
        """The restore points `project` uses now."""
        with self._lock:
            return len(self._held.get(project, {}))

    def _refusal(self, restore_point_id: str, project: str | None) -> CairnError | None:
        """Why `project` may not use the restore point now (the caller holds the lock)."""
        held = self._held.get(project, {}) if project is not None else {}
        if (project is not None and restore_point_id not in held
                and len(held) >= self.project_sessions):
            return TooManyRequests(
                f"project {project} has {len(held)} restore points open for its file "
                "requests, the most it may; retry when one has ended", retry_after=1)
        if restore_point_id in self._open:
            return None  # no new restore point: it joins the open one
        busy = sum(1 for e in self._open.values() if e.users > 0 or not e.ready.is_set())
        others = sum(n for p, n in self._waiting.items() if p != project)
        if busy >= self.capacity or (others and self.capacity - busy <= others):
            return FileServiceUnavailable(
                f"the file service has {self.capacity} restore points open, all of them in "
                "use; retry in a few seconds")
        return None

    def _take(self, restore_point_id: str, project: str | None, wait: float) -> _Open:
        closing: list[_Open] = []
        until = time.monotonic() + wait
        with self._lock:
            while True:
                closing += self._expired()
                refusal = self._refusal(restore_point_id, project)
                left = until - time.monotonic()
                if refusal is None or left <= 0:
                    break
                if isinstance(refusal, TooManyRequests):
                    self._changed.wait(min(left, 1.0))  # its own share: it waits on itself
                    continue
                # Waiting for the table: counted, so others leave it the last free ones.
                waiter = project or ""
                self._waiting[waiter] = self._waiting.get(waiter, 0) + 1
                try:
                    self._changed.wait(min(left, 1.0))
                finally:
                    self._waiting[waiter] -= 1
                    if not self._waiting[waiter]:
                        del self._waiting[waiter]
            entry = None if refusal is not None else self._enter(restore_point_id, closing)
            opener = entry is not None and entry.opener
            if entry is not None:
                entry.opener = False
                if project is not None:
                    held = self._held.setdefault(project, {})
                    held[restore_point_id] = held.get(restore_point_id, 0) + 1
        self._close_each(closing)  # outside the lock: closing waits for the parser's end
        if entry is None:
            assert refusal is not None
            raise refusal
        if opener:
            try:
                entry.opened = self.points.open(restore_point_id)
            except BaseException as error:
                entry.error = error
                with self._lock:
                    if self._open.get(restore_point_id) is entry:
                        del self._open[restore_point_id]
                entry.ready.set()
                self._give_back(entry, project)
                raise
            entry.ready.set()
            return entry
        entry.ready.wait()
        if entry.error is not None:
            self._give_back(entry, project)
            raise entry.error
        return entry

    def _enter(self, restore_point_id: str, closing: list[_Open]) -> _Open:
        """The table's entry for the restore point, one more user on it; a new one (its
        opener is the caller) in room made by closing the least recently used idle one."""
        entry = self._open.get(restore_point_id)
        if entry is not None:
            entry.users += 1
            self._open.move_to_end(restore_point_id)
            return entry
        if len(self._open) >= self.capacity:
            victim = next(e for e in self._open.values()
                          if e.users == 0 and e.ready.is_set())
            del self._open[victim.restore_point_id]
            closing.append(victim)
        entry = self._open[restore_point_id] = _Open(restore_point_id, opener=True)
        return entry

    def _give_back(self, entry: _Open, project: str | None = None) -> None:
        with self._lock:
            entry.users -= 1
            entry.idle_since = self.clock()
            last = entry.doomed and entry.users == 0
            held = self._held.get(project, {}) if project is not None else {}
            if entry.restore_point_id in held:
                held[entry.restore_point_id] -= 1
                if not held[entry.restore_point_id]:
                    del held[entry.restore_point_id]
                if not held:
                    del self._held[project]  # type: ignore[arg-type]
            self._changed.notify_all()
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
            self._changed.notify_all()
        if now:
            self._close_each([entry])

    def reap(self) -> None:
        """Close the restore points idle for `idle_seconds`."""
        with self._lock:
            closing = self._expired()
            self._changed.notify_all()
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
