"""ParserSession: one restore point's files, answered by a sealed parser child
(worker/files/parser/main.py) that this side feeds with the restore point's bytes.

The child parses; this side holds the reader (and so the credentials) and every limit:

- a wall deadline per call (`call_seconds`, `search_seconds` for search and walk): past it
  the child is killed and the call ends in ParserLimitExceeded naming the limit;
- memory: the child's RLIMIT_AS; a child that runs out says so or dies, either way the
  call ends in ParserLimitExceeded("memory");
- CPU time for the child's whole life (RLIMIT_CPU, killed by the kernel);
- bytes of the image one call may read (a filesystem crafted to read forever, in circles);
- the size of a reply (checked on the frame's header, before its bytes are awaited).

A killed child is replaced on the next call (the image opened again). Calls are
serialised: a child answers one at a time. A block the reader finds damaged (DataCorrupt)
ends the call in RestorePointDamaged, whatever the child made of the failed read."""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Final

from services.errors import (
    DataCorrupt,
    FilesEncrypted,
    FileServiceUnavailable,
    FilesUnreadable,
    IsADirectory,
    NotADirectory,
    ParserLimitExceeded,
    PathNotFound,
    RestorePointDamaged,
)
from worker.files import protocol, replies
from worker.files.sandbox import (
    Child,
    ChildConfig,
    ChildGone,
    ChildPool,
    ChildTimeout,
    StartChild,
)
from worker.files.zygote import start_child
from worker.targets.reader import RestorePointReader

log = logging.getLogger(__name__)

PRODUCTION_FACTORY: Final = "worker.files.parser.ops:Operations"

ERRORS: Final[dict[str, type[FilesUnreadable] | type[PathNotFound] | type[NotADirectory]
                   | type[IsADirectory] | type[ParserLimitExceeded]]] = {
    protocol.NOT_FOUND: PathNotFound,
    protocol.NOT_A_DIR: NotADirectory,
    protocol.IS_DIR: IsADirectory,
    protocol.UNREADABLE: FilesUnreadable,
    protocol.ENCRYPTED: FilesEncrypted,
    protocol.LIMIT: ParserLimitExceeded,
}
"""The child's errors (worker/files/parser/errors.py, by name) as the tenant sees them."""


@dataclass(frozen=True)
class ParserLimits:
    memory_bytes: int = 512 << 20
    """RLIMIT_AS of the child."""
    cpu_seconds: int = 300
    """RLIMIT_CPU of the child (its whole life)."""
    call_seconds: float = 10.0
    """Wall deadline of one call (list, stat, runs, read)."""
    search_seconds: float = 20.0
    """Wall deadline of search and walk."""
    max_reply_bytes: int = 16 << 20
    max_header_bytes: int = 4 << 20
    """The JSON of one answer (a listing, a walk): well below `max_reply_bytes`, since
    parsed it takes several times its size in the file service's memory."""
    read_bytes_per_call: int = 1 << 30
    """Bytes of the image one call may read (a bound on a bomb)."""

    def child(self, factory: str = PRODUCTION_FACTORY) -> ChildConfig:
        return ChildConfig(factory=factory, memory_bytes=self.memory_bytes,
                           cpu_seconds=self.cpu_seconds, max_reply_bytes=self.max_reply_bytes,
                           max_header_bytes=min(self.max_header_bytes, self.max_reply_bytes))


class _Broken(Exception):
    """The call ended with the child unfit for another: kill it, then raise `error`."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class ParserSession:
    """The Operations of worker/files/parser/ops.py, over `reader`, answered by a sealed
    child; errors are services.errors classes. A child comes from `start`: by default
    forked by the process's fork server (worker/files/zygote.py), spawned when that is
    down; `pool`, when given, hands out children started ahead (its config must be this
    session's)."""

    def __init__(self, reader: RestorePointReader, limits: ParserLimits = ParserLimits(), *,
                 factory: str = PRODUCTION_FACTORY, pool: ChildPool | None = None,
                 start: StartChild = start_child) -> None:
        self.reader = reader
        self.limits = limits
        self.config = limits.child(factory)
        if pool is not None and pool.config != self.config:
            raise ValueError("the pool's children are not started as this session's are")
        self._pool = pool
        self._start_child = start
        self._child: Child | None = None
        self._lock = threading.Lock()
        self._closed = False

    # The operations (same arguments and values as Operations').

    def partitions(self) -> list[dict[str, Any]]:
        value: list[dict[str, Any]] = self._call("partitions", {})[0]
        return value

    def list(self, partition: int | None, path: str, marker: str | None = None,
             limit: int = 100) -> dict[str, Any]:
        value: dict[str, Any] = self._call("list", {"partition": partition, "path": path,
                                                    "marker": marker, "limit": limit})[0]
        return value

    def stat(self, partition: int | None, path: str) -> dict[str, Any]:
        value: dict[str, Any] = self._call("stat", {"partition": partition, "path": path})[0]
        return value

    def runs(self, partition: int | None, path: str, max_runs: int) -> dict[str, Any] | None:
        value: dict[str, Any] | None = self._call(
            "runs", {"partition": partition, "path": path, "max_runs": max_runs})[0]
        return value

    def read(self, partition: int | None, path: str, offset: int, length: int) -> bytes:
        return self._call("read", {"partition": partition, "path": path, "offset": offset,
                                   "length": length})[1]

    def search(self, partition: int | None, path: str, pattern: str, limit: int,
               max_visits: int) -> dict[str, Any]:
        value: dict[str, Any] = self._call(
            "search", {"partition": partition, "path": path, "pattern": pattern,
                       "limit": limit, "max_visits": max_visits},
            seconds=self.limits.search_seconds)[0]
        return value

    def walk(self, partition: int | None, path: str, max_entries: int) -> dict[str, Any]:
        value: dict[str, Any] = self._call(
            "walk", {"partition": partition, "path": path, "max_entries": max_entries},
            seconds=self.limits.search_seconds)[0]
        return value

    def close(self) -> None:
        """Ends the child at once (a call in progress ends in FileServiceUnavailable)."""
        self._closed = True
        child = self._child
        if child is not None:
            child.signal(signal.SIGKILL)
        with self._lock:
            self._retire()

    @property
    def child_pid(self) -> int | None:
        """The running child's pid, if one runs (for tests and logs)."""
        child = self._child
        return child.pid if child is not None else None

    # The mechanics.

    def _call(self, op: str, args: dict[str, Any],
              seconds: float | None = None) -> tuple[Any, bytes]:
        with self._lock:
            if self._closed:
                raise FileServiceUnavailable("the file session was closed")
            seconds = self.limits.call_seconds if seconds is None else seconds
            try:
                child = self._child or self._start()
                return self._exchange(child, op, args, time.monotonic() + seconds, seconds)
            except _Broken as broken:
                self._retire()
                if self._closed:
                    raise FileServiceUnavailable("the file session was closed") from None
                raise broken.error from None
            except (PathNotFound, NotADirectory, IsADirectory, FilesUnreadable):
                raise  # the child's answer to this call: it serves the next
            except BaseException:
                # Interrupted mid-call (KeyboardInterrupt, a failed spawn): the child, if
                # any, cannot serve another call.
                self._retire()
                raise

    def _start(self) -> Child:
        child = self._pool.take() if self._pool is not None else self._start_child(self.config)
        self._child = child
        self._exchange(child, protocol.OPEN, {"size": self.reader.size},
                       time.monotonic() + self.limits.call_seconds, self.limits.call_seconds)
        return child

    def _retire(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.kill()

    def _exchange(self, child: Child, op: str, args: dict[str, Any], deadline: float,
                  seconds: float) -> tuple[Any, bytes]:
        """One call: the child's reads served until it answers; _Broken when the child
        must not serve another call."""
        try:
            child.send(protocol.encode({"type": protocol.CALL, "op": op, "args": args}),
                       deadline)
            budget = self.limits.read_bytes_per_call
            damaged: DataCorrupt | None = None
            while True:
                frame = child.receive(deadline)
                if frame.type == protocol.READ:
                    offset, length = _read_request(frame)
                    budget -= length
                    if budget < 0:
                        raise _Broken(ParserLimitExceeded(
                            f"image bytes: the {op} read more than "
                            f"{self.limits.read_bytes_per_call} bytes of the restore point",
                            limit="read_bytes_per_call"))
                    if damaged is None:
                        try:
                            data = self._serve(offset, length)
                        except DataCorrupt as error:
                            damaged = error
                        except Exception as error:
                            # The reader itself failed (the target is unreachable...):
                            # the service's problem, not the tenant's; the child is mid-call.
                            raise _Broken(error) from error
                    if damaged is not None:
                        child.send(protocol.encode({
                            "type": protocol.FAIL, "error": "DataCorrupt",
                            "message": "a block of the restore point failed its check"}),
                            deadline)
                    else:
                        child.send(protocol.encode({"type": protocol.DATA}, data), deadline)
                elif frame.type in (protocol.RESULT, protocol.ERROR):
                    if damaged is not None:
                        # Whatever the parser made of the bytes it could not have, the
                        # tenant learns the truth; its state may hold the failure: renew it.
                        raise _Broken(RestorePointDamaged(damaged.message, **damaged.details))
                    if frame.type == protocol.RESULT:
                        return self._checked(child, op, args, frame), frame.payload
                    refusal = _error_of(frame, args)
                    if op == protocol.OPEN or isinstance(refusal, ParserLimitExceeded):
                        raise _Broken(refusal)
                    raise refusal
                else:
                    raise protocol.ProtocolError(f"a {frame.type!r} frame during a call")
        except ChildTimeout:
            raise _Broken(ParserLimitExceeded(
                f"time: the {op} took longer than {seconds:g} s", limit="time")) from None
        except ChildGone:
            raise _Broken(self._death_of(child, op)) from None
        except protocol.FrameTooLarge as error:
            raise _Broken(ParserLimitExceeded(
                f"reply size: the {op}'s answer is larger than the parser may send "
                f"({error})", limit="reply_size")) from None
        except protocol.ProtocolError as error:
            log.warning("parser child %s broke the protocol: %s", child.pid, error)
            raise _Broken(FilesUnreadable(
                f"the filesystem could not be read: its parser failed during the {op}")) from None

    def _checked(self, child: Child, op: str, args: dict[str, Any],
                 frame: protocol.Frame) -> Any:
        try:
            return replies.checked(op, frame.header.get("value"), frame.payload, args,
                                   self.reader.size)
        except replies.Malformed as malformed:
            log.warning("parser child %s answered a malformed %s: %s", child.pid, op,
                        malformed)
            raise _Broken(FilesUnreadable(
                _unreadable(args) + f": its parser answered a malformed {op}",
                **_path_of(args))) from None

    def _serve(self, offset: int, length: int) -> bytes:
        size = self.reader.size
        if offset >= size:
            return b""
        return self.reader.read(offset, min(length, size - offset))

    def _death_of(self, child: Child, op: str) -> Exception:
        child.kill()
        status = child.exit_status
        log.info("parser child %s ended during a %s: %s", child.pid, op, status)
        if status == -signal.SIGXCPU:
            return ParserLimitExceeded(
                f"cpu: the parser used its {self.limits.cpu_seconds} s of CPU time",
                limit="cpu")
        return ParserLimitExceeded(
            f"memory: the parser ended during the {op} (its memory limit is "
            f"{self.limits.memory_bytes >> 20} MiB)", limit="memory")


def _read_request(frame: protocol.Frame) -> tuple[int, int]:
    offset, length = frame.header.get("offset"), frame.header.get("length")
    if (type(offset) is not int or type(length) is not int or offset < 0 or length < 0
            or length > protocol.MAX_READ_BYTES):
        raise protocol.ProtocolError(f"a read of {length!r} bytes at {offset!r}")
    return offset, length


def _unreadable(args: dict[str, Any]) -> str:
    path = args.get("path")
    return f"{path} could not be read" if isinstance(path, str) else \
        "the filesystem could not be read"


def _path_of(args: dict[str, Any]) -> dict[str, Any]:
    path = args.get("path")
    return {"path": path} if isinstance(path, str) else {}


def _error_of(frame: protocol.Frame, args: dict[str, Any]) -> Exception:
    name = frame.header.get("error")
    message = frame.header.get("message")
    text = str(message)[:protocol.MAX_MESSAGE_CHARS] if message else "the parser failed"
    kind = ERRORS.get(name) if isinstance(name, str) else None
    if kind is None:
        # The parser's own failure (a bug, or a crafted filesystem it did not expect):
        # the tenant is told a fixed reason; what the child said goes to the log only.
        log.warning("parser child failed (%s): %s", str(name)[:40], text)
        return FilesUnreadable(f"{_unreadable(args)}: the parser failed on it (an internal "
                               "error; the operator's logs have details)", **_path_of(args))
    if kind is ParserLimitExceeded:
        return ParserLimitExceeded(text, limit=text.partition(":")[0] if ":" in text else None)
    return kind(text)
