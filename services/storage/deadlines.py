"""Total deadlines for HTTP requests whose answers come from an endpoint that is not
trusted (`s3_requests.py`): one thread per process shuts a request's socket down when its
deadline passes, so whatever is blocked on it ends there, whatever the answer's framing (a
trickled head, a chunk-size line or trailers that never end, endless `100 Continue`, a
trickled body). A per-read timeout cannot do it: each trickled byte resets it.

A request costs one heap push and two short lock holds, no thread or timer of its own: a
worker sends thousands of requests per GiB. A request that ends in time is only marked
done; the thread drops such entries when it next wakes, which is at the earliest
deadline still pending, so it wakes about once per deadline's length, not once per
request.

A deadline holds the socket itself, never the connection that made it: `http.client` drops
a connection's socket (`conn.sock = None`) as soon as an answer says `Connection: close` or
is HTTP/1.0, while that answer's body is still read from the socket. A request has no socket
while it waits for a connection or resolves the endpoint's name: its deadline is armed with
each socket as it is made (`arm`), before anything blocks on it, and one that has already
fired shuts that socket at once."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import socket
import threading
import time

log = logging.getLogger(__name__)


class Deadline:
    """One request's: `fired` once it passed (its socket, if it had one, shut)."""

    __slots__ = ("_live", "_sock", "at", "fired")

    def __init__(self, at: float, sock: socket.socket | None) -> None:
        self.at = at
        self.fired = False
        self._sock = sock
        self._live = True


def _shut(sock: socket.socket) -> None:
    # The plain socket's shutdown, also under TLS: SSLSocket's own drops its SSL object,
    # which a thread reading it at this moment may be using. An OSError: closed meanwhile.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class Watchdog:
    _COMPACT_AFTER = 1024
    """Entries of requests done before their deadline, past which (and past half the
    heap) the heap is rebuilt without them: memory stays that of the requests in flight."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        # Also in a forked child: the parent's thread is not there, nor its requests.
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._done = 0
        self._thread: threading.Thread | None = None

    def watch(self, at: float, sock: socket.socket | None = None) -> Deadline:
        """Shuts `sock` (or the socket `arm` gives it later) down at `at` (`time.monotonic`)
        unless `end` comes first."""
        deadline = Deadline(at, sock)
        with self._cond:
            entry = (at, next(self._order), deadline)
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="request-deadlines",
                                                daemon=True)
                self._thread.start()
            elif self._heap[0] is entry:  # earlier than what the thread waits for
                self._cond.notify()
        return deadline

    def arm(self, deadline: Deadline, sock: socket.socket) -> bool:
        """Makes `sock` the one shut at `deadline` (in place of any before it). False when
        the deadline has already passed: `sock` is shut now, and nothing should wait on
        it."""
        with self._cond:
            if deadline.fired:
                _shut(sock)
                return False
            if deadline._live:
                deadline._sock = sock
            return True

    def end(self, deadline: Deadline) -> bool:
        """Stops watching (the socket is not shut after this returns); whether the
        deadline had passed, its socket shut. Idempotent."""
        with self._cond:
            if deadline._live:
                deadline._live = False
                deadline._sock = None
                self._done += 1
                if self._done > self._COMPACT_AFTER and self._done * 2 > len(self._heap):
                    self._heap = [entry for entry in self._heap if entry[2]._live]
                    heapq.heapify(self._heap)
                    self._done = 0
            return deadline.fired

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                heap = self._heap
                while heap and (not heap[0][2]._live or heap[0][0] <= now):
                    _, _, deadline = heapq.heappop(heap)
                    if deadline._live:
                        deadline._live = False
                        deadline.fired = True
                        sock, deadline._sock = deadline._sock, None
                        if sock is not None:  # none yet: `arm` shuts it when it comes
                            self._fire(sock)
                    else:
                        self._done -= 1
                self._cond.wait(heap[0][0] - now if heap else None)

    @staticmethod
    def _fire(sock: socket.socket) -> None:
        # Whatever goes wrong with one socket, the thread goes on: every later deadline of
        # the process depends on it, and nothing would tell that it had stopped.
        try:
            _shut(sock)
        except Exception:
            log.exception("a request's socket could not be shut at its deadline")


WATCHDOG = Watchdog()
"""The process's."""
