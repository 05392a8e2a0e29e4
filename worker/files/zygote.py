"""Parser children forked by a fork server (worker/files/parser/zygote.py) rather than
spawned: a few ms of CPU each instead of an interpreter's start and the Dissect imports
(~40-50 ms of CPU, 0.2-0.6 s of wall time on a busy host; measured in bench/README.md).

The design, and why:
- The file service is threaded and never forks itself. The zygote is started as a
  spawned child is (sandbox.py: `python -I -c`, LANG only, cwd /, its own session, no fd
  but one end of a SOCK_SEQPACKET socketpair); one per child configuration, lazily.
- A fork request is answered with the child's pid and three fds (SCM_RIGHTS, received
  close-on-exec): the child's stdin and stdout pipes and a pidfd of the child, opened by
  the zygote while the child is its unreaped child. The parent signals the child with
  pidfd_send_signal and waits on the pidfd: no pid reuse race though the child is not
  its own. The child is the only member of its process group (setsid; it cannot fork),
  so that is killing its group. Once the pidfd says it ended, the parent asks the zygote
  for its exit status (the zygote reaps it: no zombie stays).
- Children do not depend on the zygote: a zygote that dies (killed, out of memory) leaves
  them running, reparented to init, still held by the parent's pipes and pidfds; only the
  exit statuses of those children are lost (None). The next request finds it dead and
  starts another. No double fork and no subreaper: the pidfd is what makes that simple.
- Whenever the zygote cannot serve (it will not start, it died, it does not answer within
  CONTROL_SECONDS) the child is spawned as before (sandbox.spawn), and a zygote that
  would not start is not tried again for RETRY_SECONDS.
- A forked child seals itself exactly as a spawned one (parser/main.py's run) and says
  READY, and the parent checks that as for a spawned child."""

from __future__ import annotations

import array
import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import threading
import time
from typing import Any, Final

from worker.files.sandbox import (
    ENVIRONMENT,
    ROOT,
    SPAWN_SECONDS,
    Child,
    ChildConfig,
    spawn,
)

log = logging.getLogger(__name__)

CODE: Final = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
               "from worker.files.parser.zygote import main; main()")
CONTROL_SECONDS: Final = 5.0
"""How long the zygote may take to answer a request (a fork takes milliseconds)."""
RETRY_SECONDS: Final = 10.0
"""After a zygote would not start, children are spawned this long before another try."""


class ZygoteDown(Exception):
    """The zygote is not there or did not answer: spawn the child instead."""


class ForkedProcess:
    """A child forked by a zygote: signalled and waited on through its pidfd."""

    def __init__(self, pid: int, pidfd: int, zygote: Zygote) -> None:
        self._pid = pid
        self._pidfd = pidfd
        self._zygote = zygote
        self._lock = threading.Lock()
        """Held briefly: the pidfd is closed under it, so a signal never hits a reused fd."""
        self._waiting = threading.Lock()
        """Held by one waiter at a time (it alone closes the pidfd)."""
        self._ended = False
        self._status: int | None = None

    @property
    def pid(self) -> int:
        return self._pid

    def signal(self, number: int) -> None:
        with self._lock:
            if self._pidfd >= 0:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self._pidfd, number)

    def poll(self) -> bool:
        with self._lock:
            if not self._ended and self._pidfd >= 0:
                self._ended = _readable(self._pidfd, 0)
            return self._ended or self._pidfd < 0

    def wait(self, seconds: float | None = None) -> int | None:
        with self._waiting:
            pidfd = self._pidfd
            if pidfd < 0:
                return self._status
            if not self._ended and not _readable(pidfd, seconds):
                raise subprocess.TimeoutExpired(f"parser child {self._pid}", seconds or 0)
            with self._lock:
                self._ended = True
                os.close(pidfd)
                self._pidfd = -1
            status = self._zygote.status(self._pid)
            with self._lock:
                self._status = status
            return status

    @property
    def status(self) -> int | None:
        with self._lock:
            return self._status


class Zygote:
    """One fork server process, for children started with `config`."""

    def __init__(self, config: ChildConfig) -> None:
        self.config = config
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = subprocess.Popen(
                [*config.argv()[:2], "-c", CODE, ROOT, *config.argv()[5:],
                 "--control", str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env=dict(ENVIRONMENT), cwd="/", close_fds=True,
                pass_fds=(theirs.fileno(),), start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._control = ours
        self._lock = threading.Lock()
        self._down = False
        self.isolated: bool | None = None

    @property
    def pid(self) -> int:
        return self._process.pid

    def wait_ready(self, seconds: float = SPAWN_SECONDS) -> None:
        with self._lock:
            message = self._receive(seconds)[0]
        if message.get("type") != "ready":
            self.kill()
            raise ZygoteDown(f"the zygote began with {message!r}")
        self.isolated = bool(message.get("namespaces"))

    def fork(self) -> Child:
        """A child forked, not yet READY (the caller waits for that, not holding the lock)."""
        with self._lock:
            started = time.monotonic()
            self._send({"op": "fork"})
            message, fds = self._receive(CONTROL_SECONDS, fds=3)
        if message.get("type") != "forked" or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            raise ZygoteDown(f"the zygote answered a fork with {message!r}")
        to_child, from_child, pidfd = fds
        process = ForkedProcess(int(message["pid"]), pidfd, self)
        return Child(self.config, process, to_child, from_child, started)

    def status(self, pid: int) -> int | None:
        """The exit status of a child that ended (None if the zygote is gone)."""
        try:
            with self._lock:
                self._send({"op": "status", "pid": pid})
                message = self._receive(CONTROL_SECONDS)[0]
        except ZygoteDown:
            return None
        status = message.get("status")
        return status if type(status) is int and message.get("pid") == pid else None

    def alive(self) -> bool:
        return not self._down and self._process.poll() is None

    def kill(self) -> None:
        """Ends the zygote (only it: its children live on) and reaps it."""
        with self._lock:
            self._down = True
        with contextlib.suppress(ProcessLookupError):
            if self._process.poll() is None:
                os.kill(self._process.pid, signal.SIGKILL)
        self._process.wait()
        self._control.close()

    def _send(self, message: dict[str, Any]) -> None:
        if self._down:
            raise ZygoteDown("the zygote is down")
        try:
            self._control.sendall(json.dumps(message).encode())
        except OSError as error:
            self._down = True
            raise ZygoteDown(f"the zygote is gone: {error}") from None

    def _receive(self, seconds: float, fds: int = 0) -> tuple[dict[str, Any], list[int]]:
        if self._down:
            raise ZygoteDown("the zygote is down")
        if not _readable(self._control.fileno(), seconds):
            self._down = True
            raise ZygoteDown(f"the zygote did not answer in {seconds:g} s")
        received = array.array("i")
        try:
            data, ancillary, flags, _ = self._control.recvmsg(
                1 << 16, socket.CMSG_SPACE(fds * received.itemsize) if fds else 0,
                socket.MSG_CMSG_CLOEXEC)
        except OSError as error:
            self._down = True
            raise ZygoteDown(f"the zygote is gone: {error}") from None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                received.frombytes(payload[:len(payload) - len(payload) % received.itemsize])
        if not data or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            for fd in received:
                os.close(fd)
            self._down = True
            raise ZygoteDown("the zygote ended" if not data else "a truncated message")
        try:
            message = json.loads(data)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            for fd in received:
                os.close(fd)
            self._down = True
            raise ZygoteDown("the zygote sent no JSON object")
        return message, list(received)


class Forker:
    """Sealed children for sessions: forked by a zygote per child configuration (started
    on first use, started again when found dead), spawned when none can serve."""

    def __init__(self) -> None:
        self._zygotes: dict[ChildConfig, Zygote] = {}
        self._failed: dict[ChildConfig, float] = {}
        self._lock = threading.Lock()
        self._closed = False

    def child(self, config: ChildConfig) -> Child:
        """A sealed child, ready for its first call."""
        zygote = self._zygote(config)
        if zygote is not None:
            try:
                child = zygote.fork()
            except ZygoteDown as error:
                log.warning("parser zygote %s is down (%s): started again on next use",
                            zygote.pid, error)
                self._retire(zygote)
            else:
                child.wait_ready()
                return child
        return spawn(config)

    def zygote_pid(self, config: ChildConfig) -> int | None:
        """The running zygote's pid for `config` (tests, logs)."""
        with self._lock:
            zygote = self._zygotes.get(config)
            return zygote.pid if zygote is not None else None

    def close(self) -> None:
        """Ends the zygotes (children already forked live on, their sessions own them)."""
        with self._lock:
            self._closed = True
            zygotes, self._zygotes = list(self._zygotes.values()), {}
        for zygote in zygotes:
            zygote.kill()

    def _zygote(self, config: ChildConfig) -> Zygote | None:
        with self._lock:
            if self._closed:
                return None
            zygote = self._zygotes.get(config)
            if zygote is not None and zygote.alive():
                return zygote
            if zygote is not None:
                del self._zygotes[config]
                zygote.kill()
            if time.monotonic() < self._failed.get(config, 0.0):
                return None
            # Started under the lock: the other sessions wanting a child of this config
            # wait ~0.3 s for it rather than each spawning one.
            try:
                zygote = Zygote(config)
                zygote.wait_ready()
            except (OSError, ZygoteDown) as error:
                log.warning("parser zygote would not start (%s): spawning children for "
                            "%g s", error, RETRY_SECONDS)
                self._failed[config] = time.monotonic() + RETRY_SECONDS
                return None
            self._failed.pop(config, None)
            self._zygotes[config] = zygote
        return zygote

    def _retire(self, zygote: Zygote) -> None:
        with self._lock:
            if self._zygotes.get(zygote.config) is zygote:
                del self._zygotes[zygote.config]
        zygote.kill()


def _readable(fd: int, seconds: float | None) -> bool:
    """poll(), not select(): the service may hold fds past select's 1024."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if seconds is None else max(0, int(seconds * 1000))))


_default: Forker | None = None
_default_lock = threading.Lock()


def default_forker() -> Forker:
    """The process's Forker (its zygotes end with the process: their control socket
    closes)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Forker()
        return _default


def start_child(config: ChildConfig) -> Child:
    """A sealed child from the process's Forker: what sessions use by default."""
    return default_forker().child(config)

