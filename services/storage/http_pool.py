"""Keep-alive HTTP(S) connections to one endpoint, at most `size` open at once, shared by
the threads of a worker (an object target's uploads and downloads in flight).

Nothing is taken from the environment: no proxy variables (`http.client` reads none), and
TLS verifies the endpoint's certificate and name against the CA bundle botocore uses by
default (certifi's), never one named by `SSL_CERT_FILE` or `AWS_CA_BUNDLE`.

Connections are opened here (`connect`), never by `http.client` (`socket.create_connection`
gives each address the name resolves to the whole timeout, and makes the socket where no
deadline can reach it): each step within the request's deadline.

A connection idle for more than IDLE_SECONDS is closed rather than reused: the middleboxes
between a worker and its endpoint (NAT, firewalls, load balancers) forget idle flows after a
while, often without telling either end, and a request sent on such a flow meets silence
until its timeout."""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import certifi

from services.storage.resolver import RESOLVER, Address

IDLE_SECONDS = 15.0
"""The longest a connection is kept idle for reuse. Below what endpoints keep an idle
connection open (AWS S3 about 20 s, RGW's beast front end 65 s, nginx 75 s), so a
connection is rarely reused just as its server closes it; and far below what middleboxes
keep an idle flow (AWS NAT gateways 350 s, Azure's load balancers 4 min, Linux conntrack
5 days), so a flow one dropped silently is not met. Reconnecting after 15 s idle costs a
handshake a worker busy with a backup never pays: its connections are busy back to back."""


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection was closed by its peer (or has bytes nobody asked for):
    its socket reads as ready. urllib3 checks the same before reusing one."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        # poll, not select: select refuses a descriptor past 1024, which a busy worker's
        # sockets reach, and every idle connection then read as dropped.
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


class PoolBusy(Exception):
    """No connection came free before the request's deadline: every one was held."""


class ConnectionPool:
    """Connections to `endpoint` (`scheme://host[:port]`). `take` waits while `size` are
    taken, until its caller's deadline at most; `give` hands one back for reuse, or closes
    it when its answer was not read to the end (its next answer would be the rest of
    this one). A connection idle for more than `idle_seconds` is closed, not reused."""

    def __init__(self, endpoint: str, size: int, timeout: float, *,
                 idle_seconds: float = IDLE_SECONDS) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"endpoint {endpoint!r} is not an http or https URL")
        self.https = parts.scheme == "https"
        self.hostname = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        shown = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        self.host = shown if self.port == (443 if self.https else 80) else f"{shown}:{self.port}"
        """The Host header (signed, so sent as is): the endpoint's host, with its port when
        that is not the scheme's (botocore's `_host_from_url`)."""
        self.path = parts.path.rstrip("/")
        """What the endpoint's URL puts before every request's path."""
        self.timeout = timeout
        self.size = size
        self._context = ssl.create_default_context(cafile=certifi.where()) \
            if self.https else None
        self.idle_seconds = idle_seconds
        self._idle: list[tuple[float, http.client.HTTPConnection]] = []
        """Connections given back, each with when (`time.monotonic`), the latest last."""
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._closed = False

    def take(self, until: float | None = None) -> http.client.HTTPConnection:
        """A connection, waiting for one to come free until `until` (`time.monotonic`) at
        most (PoolBusy then); None: as long as it takes. The latest given back, unless it
        has been idle too long (then every idle one has: all are closed) or was closed by
        its peer."""
        if not self._slots.acquire(
                timeout=None if until is None else max(0.0, until - time.monotonic())):
            raise PoolBusy(f"no connection of {self.size} came free in time")
        try:
            while True:
                closing: list[tuple[float, http.client.HTTPConnection]] = []
                conn = None
                with self._lock:
                    if self._closed:
                        raise ConnectionError("the connection pool is closed")
                    if not self._idle:
                        pass
                    elif time.monotonic() - self._idle[-1][0] > self.idle_seconds:
                        closing, self._idle = self._idle, []
                    else:
                        conn = self._idle.pop()[1]
                for _, old in closing:
                    old.close()
                if conn is None:
                    return self._new()
                if not _dropped(conn):
                    conn.sock.settimeout(self.timeout)
                    return conn
                conn.close()
        except BaseException:
            self._slots.release()
            raise

    def _new(self) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection(self.hostname, self.port, timeout=self.timeout)
        conn.auto_open = 0  # `connect` opens it, or nothing does
        return conn

    def connect(self, conn: http.client.HTTPConnection, until: float,
                arm: Callable[[socket.socket], bool]) -> None:
        """Opens `conn` (TLS included, for https) by `until` (`time.monotonic`) at most: the
        name looked up within that, then each of its addresses in turn, each given what is
        left (no more than `timeout`). `arm` is given each socket before anything waits on
        it (the request's deadline shuts it), and says False once that deadline has passed.
        OSError (TimeoutError among them) when no address connected in time."""
        sock = self._open(until, arm)
        try:
            if self._context is not None:
                # The handshake on the TLS socket the deadline holds: wrapping detaches the
                # plain one, which shuts nothing after that.
                sock = self._context.wrap_socket(sock, server_hostname=self.hostname,
                                                 do_handshake_on_connect=False)
                if not arm(sock):
                    raise TimeoutError("the request's deadline passed before TLS began")
                sock.settimeout(min(self.timeout, max(until - time.monotonic(), 0.001)))
                sock.do_handshake()
            sock.settimeout(self.timeout)
        except BaseException:
            sock.close()
            raise
        conn.sock = sock

    def _open(self, until: float, arm: Callable[[socket.socket], bool]) -> socket.socket:
        failure: OSError = TimeoutError("the request's deadline passed before a connection "
                                        "was made")
        for family, kind, proto, _, address in self._addresses(until):
            left = until - time.monotonic()
            sock = socket.socket(family, kind, proto)
            if left <= 0 or not arm(sock):
                sock.close()
                break
            try:
                sock.settimeout(min(self.timeout, left))
                sock.connect(address)
            except OSError as exc:
                sock.close()
                failure = exc
                continue
            if family in (socket.AF_INET, socket.AF_INET6):  # as http.client does
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        raise failure

    def _addresses(self, until: float) -> Sequence[Address]:
        return RESOLVER.addresses(self.hostname, self.port, until)

    def give(self, conn: http.client.HTTPConnection, *, reusable: bool) -> None:
        try:
            with self._lock:
                if reusable and not self._closed and conn.sock is not None:
                    self._idle.append((time.monotonic(), conn))
                    return
            conn.close()
        finally:
            self._slots.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for _, conn in idle:
            conn.close()
