"""Keep-alive HTTP(S) connections to one endpoint, at most `size` open at once, shared by
the threads of a worker (an object target's uploads and downloads in flight).

Nothing is taken from the environment: no proxy variables (`http.client` reads none), and
TLS verifies the endpoint's certificate and name against the CA bundle botocore uses by
default (certifi's), never one named by `SSL_CERT_FILE` or `AWS_CA_BUNDLE`.

Connections are opened here (`connect`), never by `http.client` (`socket.create_connection`
gives each address the name resolves to the whole timeout, and makes the socket where no
deadline can reach it): each step within the request's deadline."""

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


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection was closed by its peer (or has bytes nobody asked for):
    its socket reads as ready. urllib3 checks the same before reusing one."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class PoolBusy(Exception):
    """No connection came free before the request's deadline: every one was held."""


class ConnectionPool:
    """Connections to `endpoint` (`scheme://host[:port]`). `take` waits while `size` are
    taken, until its caller's deadline at most; `give` hands one back for reuse, or closes
    it when its answer was not read to the end (its next answer would be the rest of
    this one)."""

    def __init__(self, endpoint: str, size: int, timeout: float) -> None:
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
        self._idle: list[http.client.HTTPConnection] = []
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._closed = False

    def take(self, until: float | None = None) -> http.client.HTTPConnection:
        """A connection, waiting for one to come free until `until` (`time.monotonic`) at
        most (PoolBusy then); None: as long as it takes."""
        if not self._slots.acquire(
                timeout=None if until is None else max(0.0, until - time.monotonic())):
            raise PoolBusy(f"no connection of {self.size} came free in time")
        try:
            while True:
                with self._lock:
                    if self._closed:
                        raise ConnectionError("the connection pool is closed")
                    conn = self._idle.pop() if self._idle else None
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
                    self._idle.append(conn)
                    return
            conn.close()
        finally:
            self._slots.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
