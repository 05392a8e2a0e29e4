"""Starting, talking to and ending a parser child (worker/files/parser/main.py).

The child is `python -I -c ...` with the code of this very tree (ROOT, from this file: a
worktree runs its own parser), an environment of LANG only (no CAIRN_*, no keyring path, no
database URL), no fd but its stdin and stdout pipes and stderr on /dev/null, in a session
of its own (its process group is what is killed), working directory "/".

Its rlimits, namespaces and seccomp filter it sets on itself, first thing, before it reads
a call (main.py says which). Not in a preexec_fn: the file service is threaded, and
Python documents preexec_fn as unsafe in a threaded parent (it also forces a fork of the
whole parent rather than a vfork). Nothing of the tenant's reaches the child before it
says it is sealed.

Every exchange with a child has a deadline: the parent polls its pipes, never blocks on a
child that stopped reading or writing.

`spawn` starts a child from nothing; sessions get theirs forked by a fork server that
imported the parsers once (worker/files/zygote.py), and spawned only while it is down.
A Child is the same either way: its pipes, and a Process that signals and reaps it."""


from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from worker.files import protocol

log = logging.getLogger(__name__)

ROOT: Final = str(Path(__file__).resolve().parents[2])
CODE: Final = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
               "from worker.files.parser.main import main; main()")
ENVIRONMENT: Final = {"LANG": "C.UTF-8"}
SPAWN_SECONDS: Final = 15.0
"""How long a child may take to import and seal itself (~0.2 s measured; a busy host)."""

_unisolated_logged = False


class ChildTimeout(Exception):
    """The child did not answer within the deadline."""


class ChildGone(Exception):
    """The child's pipe ended: it exited or was killed."""


@dataclass(frozen=True)
class ChildConfig:
    """What a child is started with (the session's limits, the operations it serves)."""

    factory: str = "worker.files.parser.ops:Operations"
    memory_bytes: int = 512 << 20
    cpu_seconds: int = 300
    max_reply_bytes: int = 16 << 20
    max_header_bytes: int = 4 << 20
    nofile: int = 16

    def argv(self) -> list[str]:
        return [sys.executable, "-I", "-c", CODE, ROOT,
                "--factory", self.factory, "--memory", str(self.memory_bytes),
                "--cpu", str(self.cpu_seconds), "--nofile", str(self.nofile),
                "--max-reply", str(self.max_reply_bytes),
                "--max-header", str(self.max_header_bytes)]


class Process(Protocol):
    """How the parent signals and reaps a child: a spawned one is its own child
    (SpawnedProcess); one forked by the fork server is not (worker/files/zygote.py)."""

    @property
    def pid(self) -> int: ...

    def signal(self, number: int) -> None:
        """Signals the child's whole process group, never another process's."""

    def wait(self, seconds: float | None = None) -> int | None:
        """Reaps the child (subprocess.TimeoutExpired if it runs on); its exit status as
        Popen.returncode says it, None when it cannot be known."""

    def poll(self) -> bool:
        """True once the child has ended."""

    @property
    def status(self) -> int | None:
        """The exit status once reaped (else None)."""


class SpawnedProcess:
    """A child the parent spawned (subprocess.Popen)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self._reaping = threading.Lock()

    @property
    def pid(self) -> int:
        return self._process.pid

    def signal(self, number: int) -> None:
        """Unless the child was reaped: its pid, and so its group's id, could be another
        process's by now."""
        with self._reaping:
            if self._process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, number)

    def wait(self, seconds: float | None = None) -> int | None:
        with self._reaping:
            return self._process.wait(seconds)

    def poll(self) -> bool:
        with self._reaping:
            return self._process.poll() is not None

    @property
    def status(self) -> int | None:
        with self._reaping:
            return self._process.poll()


class Child:
    """One running parser child and the parent's end of its pipes."""

    def __init__(self, config: ChildConfig, process: Process, to_child: int,
                 from_child: int, started: float) -> None:
        self.config = config
        self.started = started
        self.process = process
        self._in = to_child
        self._out = from_child
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        self._decoder = protocol.FrameDecoder(protocol.FrameLimits(
            max_header=config.max_header_bytes, max_payload=config.max_reply_bytes))
        self.isolated: bool | None = None
        self._pipes = threading.Lock()
        self.sealed_after: float | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, seconds: float = SPAWN_SECONDS) -> None:
        """Waits for the child's READY (imported, limited, sealed); kills it otherwise."""
        try:
            frame = self.receive(time.monotonic() + seconds)
            if frame.type != protocol.READY:
                raise protocol.ProtocolError(f"a child began with {frame.type!r}, not ready")
        except BaseException:
            self.kill()
            raise
        self.sealed_after = time.monotonic() - self.started
        self.isolated = bool(frame.header.get("namespaces"))
        global _unisolated_logged
        if not self.isolated and not _unisolated_logged:
            _unisolated_logged = True
            log.warning("the kernel refused the parser child a user and network namespace: "
                        "it runs with its rlimits and seccomp filter only")

    def send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            self._wait(self._in, select.POLLOUT, deadline)
            try:
                written = os.write(self._in, view)
            except (BrokenPipeError, ConnectionResetError, OSError):
                raise ChildGone("the parser child stopped reading") from None
            view = view[written:]

    def receive(self, deadline: float) -> protocol.Frame:
        """The child's next frame; ProtocolError for one past the limits (kill it then)."""
        while (frame := self._decoder.next()) is None:
            self._wait(self._out, select.POLLIN, deadline)
            try:
                data = os.read(self._out, 1 << 20)
            except OSError:
                data = b""
            if not data:
                raise ChildGone("the parser child ended")
            self._decoder.feed(data)
        return frame

    def _wait(self, fd: int, event: int, deadline: float) -> None:
        poller = select.poll()
        poller.register(fd, event)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChildTimeout
            if poller.poll(max(1, int(left * 1000) + 1)):
                return

    def signal(self, number: int) -> None:
        """Signals the child's whole process group (never once the child is reaped)."""
        self.process.signal(number)

    def kill(self) -> None:
        """Kills the child's whole process group and reaps the child."""
        self.signal(signal.SIGKILL)
        self.reap()

    def reap(self) -> int | None:
        self._close_pipes()
        return self.process.wait()

    def _close_pipes(self) -> None:
        with self._pipes:
            for fd in (self._in, self._out):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._in = self._out = -1

    def close(self) -> None:
        """Ends a child politely (stdin closed: it returns), killing it if it lingers."""
        if not self.process.poll():
            with self._pipes:
                if self._in >= 0:
                    os.close(self._in)
                    self._in = -1
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(1.0)
        self.kill()

    def alive(self) -> bool:
        return not self.process.poll()

    @property
    def exit_status(self) -> int | None:
        return self.process.status


def spawn(config: ChildConfig) -> Child:
    """A sealed child started from nothing (`python -I`), ready for its first call."""
    started = time.monotonic()
    child_stdin, to_child = os.pipe()
    from_child, child_stdout = os.pipe()
    try:
        process = subprocess.Popen(
            config.argv(), stdin=child_stdin, stdout=child_stdout,
            stderr=subprocess.DEVNULL, env=dict(ENVIRONMENT), cwd="/", close_fds=True,
            start_new_session=True)
    except BaseException:
        os.close(to_child)
        os.close(from_child)
        raise
    finally:
        os.close(child_stdin)
        os.close(child_stdout)
    child = Child(config, SpawnedProcess(process), to_child, from_child, started)
    child.wait_ready()
    return child


StartChild = Callable[[ChildConfig], Child]
"""How a session gets a sealed child: spawn, or worker/files/zygote.py's Forker.child."""


class ChildPool:
    """A few sealed idle children, so a session's first call does not wait ~0.2 s for an
    interpreter to start and import the parsers (versions of a file across 30 restore
    points open 30 sessions). A child leaves the pool for one session and never returns
    to it: it has read that restore point's bytes."""

    def __init__(self, config: ChildConfig, size: int = 2, start: StartChild = spawn) -> None:
        self.config = config
        self._start = start
        self.size = size
        self._idle: list[Child] = []
        self._lock = threading.Lock()
        self._wanted = threading.Condition(self._lock)
        self._closed = False
        self._filler: threading.Thread | None = None

    def take(self) -> Child:
        with self._lock:
            if self._filler is None and self.size > 0 and not self._closed:
                self._filler = threading.Thread(target=self._fill, name="parser-pool",
                                                daemon=True)
                self._filler.start()
            while self._idle:
                child = self._idle.pop(0)
                self._wanted.notify()
                if child.alive():
                    return child
                child.kill()
        return self._start(self.config)

    def _fill(self) -> None:
        while True:
            with self._lock:
                while not self._closed and len(self._idle) >= self.size:
                    self._wanted.wait()
                if self._closed:
                    return
            try:
                child = self._start(self.config)
            except Exception:
                log.exception("a parser child could not be started for the pool")
                time.sleep(1.0)
                continue
            with self._lock:
                if self._closed:
                    child.kill()
                    return
                self._idle.append(child)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._wanted.notify_all()
        for child in idle:
            child.kill()

    def idle_pids(self) -> list[int]:
        with self._lock:
            return [child.pid for child in self._idle]


def describe_exit(status: int | None) -> dict[str, Any]:
    """How a child ended, for a log line."""
    if status is None:
        return {"running": True}
    if status < 0:
        return {"signal": signal.Signals(-status).name}
    return {"exit_code": status}
