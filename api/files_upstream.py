"""One answer of the file service (cairn-files), read as lean as a relay can: an HTTP/1.1
GET on a connection of its own, the bytes the event loop receives fed straight to
httptools (C, as uvicorn's own server parses), each body piece handed on as it arrives.

Why not httpx here: its HTTP/1.1 layer (httpcore over h11, pure Python) reads 64 KiB at a
time and walks a dozen Python frames per read; relaying a download cost the API process
1.5 CPU-seconds per GiB (bench/README.md, file-level restore), more than cairn-files spent
reading the restore point. Nor asyncio's StreamReader: it copies every byte into its
buffer and out again. Here each byte is copied once in Python (httptools' body piece),
and a slow client pauses the reading (HIGH_WATER) rather than filling memory.

The file service is the deployment's own, behind a token, but its answer is still bounded:
a head of at most HEAD_BYTES in at most MAX_HEADERS lines, whole within `read_seconds` of
the request (the file service says nothing before its head, so silence would end it as
late), each wait for more of the body within `read_seconds`. The head's bytes are counted
as they arrive, not only as httptools completes each line: it keeps a line still arriving
(a status line or a header value that never ends) whole in memory, 100 MiB of one value
took 200 MiB and raised nothing.

What the request carries is the API's: the path and query it built from checked values, the
token, the project, and the client's Range and If-Range when they hold no control
character."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import cast
from urllib.parse import urlencode, urlsplit

import httptools

HIGH_WATER = 4 << 20
"""Bytes received and not yet handed to the client past which reading pauses."""

HEAD_BYTES = 64 << 10
MAX_HEADERS = 100


class UpstreamBroken(Exception):
    """The file service's answer is not HTTP, too large a head, or ended early."""


class Endpoint:
    """Where the file service answers: scheme, host and port of its URL."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.authority = parts.netloc
        self._ssl = ssl.create_default_context() if self.tls else None

    async def connect(self, protocol: Callable[[], Upstream], timeout: float
                      ) -> tuple[asyncio.BaseTransport, Upstream]:
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(
            loop.create_connection(protocol, self.host, self.port, ssl=self._ssl), timeout)


def _clean(value: str) -> bool:
    return value.isprintable() and "\r" not in value and "\n" not in value


class Upstream(asyncio.Protocol):
    """The file service's answer to one GET: `open` it (the status and headers), then
    iterate `body()`; `close` at the end, or when the client goes away."""

    def __init__(self, read_seconds: float) -> None:
        self._read_seconds = read_seconds
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._pieces: deque[bytes] = deque()
        self._held = self._head = self._unheaded = 0
        self._paused = self._headed = self._complete = False
        self._error: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []

    @classmethod
    async def open(cls, endpoint: Endpoint, path: str, params: Sequence[tuple[str, str]],
                   headers: Mapping[str, str], *, connect_seconds: float,
                   read_seconds: float) -> Upstream:
        """Asks for `path?params` with `headers`; returns once the answer's head is in.
        OSError or TimeoutError when the file service cannot be reached, UpstreamBroken
        when what it says is not an answer."""
        _transport, upstream = await endpoint.connect(lambda: cls(read_seconds),
                                                      connect_seconds)
        try:
            target = path + (f"?{urlencode(params)}" if params else "")
            lines = [f"GET {target} HTTP/1.1", f"Host: {endpoint.authority}",
                     "Connection: close",
                     *(f"{name}: {value}" for name, value in headers.items()
                       if _clean(name) and _clean(value))]
            upstream._write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            until = asyncio.get_running_loop().time() + read_seconds
            while not upstream._headed:
                await upstream._more(until)
        except BaseException:
            upstream.close()
            raise
        return upstream

    async def body(self) -> AsyncIterator[bytes]:
        """The answer's body, piece by piece as it arrives (chunked or not)."""
        while True:
            while self._pieces:
                piece = self._pieces.popleft()
                self._held -= len(piece)
                if self._paused and self._held < HIGH_WATER // 2 and self._transport:
                    self._paused = False
                    self._transport.resume_reading()
                yield piece
            if self._complete:
                return
            await self._more()

    def close(self) -> None:
        if self._transport is not None:
            with contextlib.suppress(OSError, RuntimeError):
                self._transport.close()

    def _write(self, data: bytes) -> None:
        assert self._transport is not None
        self._transport.write(data)

    async def _more(self, until: float | None = None) -> None:
        """Waits until something arrives (or the connection ends), within `read_seconds`
        and before the loop's time `until`; raises what broke it."""
        if self._error is None and not self._complete:
            loop = asyncio.get_running_loop()
            seconds = self._read_seconds
            if until is not None:
                seconds = min(seconds, until - loop.time())
                if seconds <= 0:
                    raise TimeoutError(f"the file service's answer has no complete head "
                                       f"within {self._read_seconds:g} s")
            self._waiter = loop.create_future()
            try:
                await asyncio.wait_for(self._waiter, seconds)
            finally:
                self._waiter = None
        if self._error is not None:
            raise self._error

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # asyncio's callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports (the API's loop) are not subclasses of asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._error is not None:  # closed: nothing more is parsed or kept
            return
        if not self._headed:
            self._unheaded += len(data)  # the head and, in the read that ends it, more
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            context = exc.__context__  # a callback's own error, raised below
            self._error = context if isinstance(context, UpstreamBroken) else UpstreamBroken(
                f"the file service's answer is not HTTP: {exc}")
        if not self._headed and self._unheaded > HEAD_BYTES:
            self._error = UpstreamBroken(f"the file service's answer has a head over "
                                         f"{HEAD_BYTES} bytes")
        if self._error is not None:
            self.close()
        elif self._held > HIGH_WATER and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._complete and self._error is None:
            self._error = UpstreamBroken("the file service closed the connection before the "
                                         "end of its answer")
        self._wake()

    # httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._head += len(name) + len(value) + 4
        if len(self.headers) >= MAX_HEADERS or self._head > HEAD_BYTES:
            raise UpstreamBroken(f"the file service's answer has more than {MAX_HEADERS} "
                                 f"headers or a head over {HEAD_BYTES} bytes")
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self._headed = True

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)
        self._held += len(body)

    def on_message_complete(self) -> None:
        self._complete = True
