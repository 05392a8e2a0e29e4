"""An S3 endpoint on loopback in front of the local RGW, for tests of what a bucket holder
or a race can do: it forwards every request to RGW as it came (the signature covers the
Host header, which is kept, so RGW checks it as if it had been asked directly), and on
request it

- holds the first writes of a target's data key until several writers have each found no
  key, then lets them through one at a time, each after the previous writer read the key
  back: the interleaving in which first backups race to make a key, forced every time;
- writes what comes with an `If-None-Match` condition without it, as a store that ignores
  the condition would (the condition is signed, so the proxy writes with credentials of its
  own and answers as RGW would have);
- holds the first write of a target's data key until the test releases it: a worker that
  stalls just before its key write (a retry's backoff, a paused process) while others go
  on, and writes late;
- refuses writes that come with an `If-None-Match` condition, as a store that does not
  take the condition does (501 NotImplemented);
- runs a test's action just before it passes on a chosen write (to change the bucket at
  that exact moment of a job);
- answers reads of chosen objects with a body of its own far longer than they can be (its
  length announced, or chunked without one), counting what it managed to send before the
  client hung up, or trickles their true body a few bytes at a time."""

from __future__ import annotations

import hashlib
import http.client
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import boto3

from tests.support.redis_server import free_port

KEY_SUFFIX = "/keys/data-key"
OVERSIZED = 64 << 20
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "server", "date"}


@dataclass
class Seen:
    method: str
    path: str
    status: int
    conditional: bool
    body_sha256: str | None = None
    """Of a write's body."""


@dataclass
class HeldWrite:
    """The first write of a data key, held: `arrived` when it is, passed on at `release`."""

    path: str
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    used: bool = False


@dataclass
class _Race:
    prefix: str
    writers: int
    misses: int = 0
    """GETs of the key answered 404 so far."""
    reads_back: int = 0
    """GETs of the key answered 200 so far."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up
            super().handle_error(request, client_address)


@dataclass
class S3Proxy:
    upstream: str
    credentials: Path
    """The RGW user's keys (`rgw.CREDENTIALS`): for the writes the proxy makes itself."""
    port: int = field(default_factory=free_port)
    seen: list[Seen] = field(default_factory=list)
    oversized_sent: list[int] = field(default_factory=list)
    """Of each oversized answer, the bytes written before the client hung up."""

    def __post_init__(self) -> None:
        self._races: list[_Race] = []
        self._unconditional: list[str] = []
        self._refusing: list[str] = []
        self._held: list[HeldWrite] = []
        self._trickled: list[str] = []
        self._oversized: list[tuple[str, bool]] = []
        self._hooks: list[tuple[str, Callable[[], None]]] = []
        self._lock = threading.Condition()
        self._turn = threading.Lock()  # one held key write at a time
        proxy = self
        upstream = urlsplit(self.upstream)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            _conn: http.client.HTTPConnection | None = None

            def _forward(self) -> None:
                length = int(self.headers.get("content-length", "0") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("connection", "keep-alive", "expect")}
                conditional = "if-none-match" in {k.lower() for k in headers}
                oversized = proxy._oversized_for(self.path) if self.command == "GET" else None
                if oversized is not None:
                    self._answer_oversized(oversized)
                    return
                if self.command == "PUT" and conditional and proxy._refuses(self.path):
                    self._refuse_condition()
                    return
                if self.command == "PUT":
                    proxy._hold_if_first(self.path)
                race = proxy._race_for(self.path)
                if race is not None and self.command == "PUT":
                    with proxy._turn:
                        proxy._wait_for_writers(race)
                        reads_back = race.reads_back
                        self._write(headers, body, conditional)
                        proxy._wait_for_read_back(race, reads_back)
                    return
                if self.command == "PUT":
                    proxy._before_write(self.path)
                    self._write(headers, body, conditional)
                    return
                status = self._pass_on(headers, body, conditional)
                if race is not None and self.command == "GET":
                    proxy._count_read(race, status)

            def _write(self, headers: dict[str, str], body: bytes | None,
                       conditional: bool) -> None:
                if not (conditional and proxy._drops_condition(self.path)):
                    self._pass_on(headers, body, conditional)
                    return
                bucket, key = unquote(self.path.split("?", 1)[0]).lstrip("/").split("/", 1)
                proxy._own_client().put_object(Bucket=bucket, Key=key, Body=body or b"")
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                with proxy._lock:
                    proxy.seen.append(Seen("PUT", self.path.split("?", 1)[0], 200, conditional,
                                           hashlib.sha256(body or b"").hexdigest()))

            def _refuse_condition(self) -> None:
                body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented'
                        b"</Code><Message>A header you provided implies functionality that "
                        b"is not implemented</Message></Error>")
                self.send_response(501)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                with proxy._lock:
                    proxy.seen.append(Seen("PUT", self.path.split("?", 1)[0], 501, True))

            def _pass_on(self, headers: dict[str, str], body: bytes | None,
                         conditional: bool) -> int:
                for fresh in (False, True):  # RGW may have closed an idle connection
                    if self._conn is None or fresh:
                        self._conn = http.client.HTTPConnection(
                            upstream.hostname or "127.0.0.1", upstream.port, timeout=30)
                    try:
                        self._conn.request(self.command, self.path, body=body, headers=headers)
                        answer = self._conn.getresponse()
                        data = answer.read()
                        break
                    except (http.client.RemoteDisconnected, ConnectionError):
                        if fresh:
                            raise
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in _HOP:
                        self.send_header(name, value)
                if self.command == "HEAD":
                    self.send_header("Content-Length", answer.getheader("Content-Length", "0"))
                else:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command == "GET" and proxy._trickles(self.path):
                    self._trickle(data)
                elif self.command != "HEAD":
                    self.wfile.write(data)
                with proxy._lock:
                    proxy.seen.append(Seen(
                        self.command, self.path.split("?", 1)[0], answer.status, conditional,
                        hashlib.sha256(body or b"").hexdigest() if self.command == "PUT"
                        else None))
                return answer.status

            def _trickle(self, data: bytes) -> None:
                """A few bytes every half second, each well within any per-read timeout,
                until the client hangs up."""
                try:
                    for start in range(0, len(data), 4):
                        self.wfile.write(data[start:start + 4])
                        self.wfile.flush()
                        time.sleep(0.5)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

            def _answer_oversized(self, announced: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "binary/octet-stream")
                if announced:
                    self.send_header("Content-Length", str(OVERSIZED))
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                piece = bytes(64 << 10)
                framed = b"%x\r\n" % len(piece) + piece + b"\r\n"
                sent = 0
                try:
                    while sent < OVERSIZED:
                        self.wfile.write(piece if announced else framed)
                        sent += len(piece)
                    if not announced:
                        self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                with proxy._lock:
                    proxy.oversized_sent.append(sent)
                self.close_connection = True

            def do_GET(self) -> None:
                self._forward()

            def do_HEAD(self) -> None:
                self._forward()

            def do_PUT(self) -> None:
                self._forward()

            def do_POST(self) -> None:
                self._forward()

            def do_DELETE(self) -> None:
                self._forward()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = _Server(("127.0.0.1", self.port), Handler)
        self._client: Any = None
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- what the test arms --------------------------------------------------------------
    def race_key_writes(self, prefix: str, writers: int = 2) -> None:
        """Writes of the data key under `prefix` wait until `writers` reads of it found
        none; then they go one at a time, each after the previous writer read it back."""
        with self._lock:
            self._races.append(_Race(f"/{prefix}{KEY_SUFFIX}", writers))

    def hold_first_key_write(self, prefix: str) -> HeldWrite:
        """The first write of the data key under `prefix` waits (up to two minutes) until
        the test sets the returned `release`; later writes pass."""
        held = HeldWrite(f"/{prefix}{KEY_SUFFIX}")
        with self._lock:
            self._held.append(held)
        return held

    def refuse_conditions(self, prefix: str) -> None:
        """Writes under `prefix` that come with a condition are answered 501, as a store
        that does not take the condition answers."""
        self._refusing.append(f"/{prefix}/")

    def trickle(self, path_part: str) -> None:
        """GETs whose path holds `path_part` get their true body a few bytes at a time."""
        self._trickled.append(path_part)

    def before_write(self, path_part: str, action: Callable[[], None]) -> None:
        """`action` runs once, just before the first write whose path holds `path_part` is
        passed on."""
        with self._lock:
            self._hooks.append((path_part, action))

    def ignore_conditions(self, prefix: str) -> None:
        """Writes under `prefix` are made without their If-None-Match, and answered as
        written: as a store that ignores the condition."""
        self._unconditional.append(f"/{prefix}/")

    def answer_oversized(self, path_part: str, *, announced: bool = True) -> None:
        """GETs whose path holds `path_part` get OVERSIZED bytes of zeros (their length
        announced, or chunked with none)."""
        self._oversized.append((path_part, announced))

    def disarm_oversized(self) -> int:
        """Stop answering so; the most bytes any one such answer got out before the client
        hung up."""
        self._oversized.clear()
        with self._lock:
            most = max(self.oversized_sent, default=0)
            self.oversized_sent.clear()
        return most

    def key_writes(self, prefix: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen
                    if s.method == "PUT" and s.path.endswith(f"/{prefix}{KEY_SUFFIX}")]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the handler's side --------------------------------------------------------------
    def _race_for(self, path: str) -> _Race | None:
        bare = path.split("?", 1)[0]
        with self._lock:
            return next((r for r in self._races if bare.endswith(r.prefix)), None)

    def _before_write(self, path: str) -> None:
        with self._lock:
            due = [hook for hook in self._hooks if hook[0] in path]
            for hook in due:
                self._hooks.remove(hook)
        for _, action in due:
            action()

    def _own_client(self) -> Any:
        with self._lock:
            if self._client is None:
                keys = json.loads(self.credentials.read_text())
                self._client = boto3.session.Session().client(
                    "s3", endpoint_url=self.upstream, region_name=keys["region"],
                    aws_access_key_id=keys["access_key"],
                    aws_secret_access_key=keys["secret_key"])
            return self._client

    def _hold_if_first(self, path: str) -> None:
        bare = path.split("?", 1)[0]
        with self._lock:
            held = next((h for h in self._held if not h.used and bare.endswith(h.path)), None)
            if held is not None:
                held.used = True
        if held is not None:
            held.arrived.set()
            held.release.wait(120)

    def _refuses(self, path: str) -> bool:
        return any(part in path for part in self._refusing)

    def _trickles(self, path: str) -> bool:
        return any(part in path for part in self._trickled)

    def _drops_condition(self, path: str) -> bool:
        return any(part in path for part in self._unconditional)

    def _oversized_for(self, path: str) -> bool | None:
        """Whether to announce the length of an oversized answer; None: answer truly."""
        return next((a for p, a in self._oversized if p in path), None)

    def _count_read(self, race: _Race, status: int) -> None:
        with self._lock:
            if status == 404:
                race.misses += 1
            elif status == 200:
                race.reads_back += 1
            self._lock.notify_all()

    def _wait_for_writers(self, race: _Race) -> None:
        deadline = time.monotonic() + 30
        with self._lock:
            while race.misses < race.writers and time.monotonic() < deadline:
                self._lock.wait(0.1)

    def _wait_for_read_back(self, race: _Race, before: int) -> None:
        deadline = time.monotonic() + 5
        with self._lock:
            while race.reads_back <= before and time.monotonic() < deadline:
                self._lock.wait(0.1)
