"""One answer of the file service (cairn-files), read as lean as a relay can: an HTTP/1.1
GET on a connection of its own, the answer parsed by httptools (C, as uvicorn's own server
parses) from reads of up to a MiB, each body piece handed on as it arrives.

Why not httpx here: its HTTP/1.1 layer (httpcore over h11, pure Python) reads 64 KiB at a
time and walks a dozen Python frames per read; relaying a download cost the API process
1.5 CPU-seconds per GiB (bench/README.md, file-level restore), more than cairn-files spent
reading the restore point. This costs a tenth of that.

The file service is the deployment's own, behind a token, but its answer is still bounded:
a head of at most HEAD_BYTES in at most MAX_HEADERS lines, each read within `read_seconds`.
What the request carries is the API's: the path and query it built from checked values,
the token, the project, and the client's Range and If-Range when they hold no control
character."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from urllib.parse import urlencode, urlsplit

import httptools

READ_BYTES = 1 << 20
"""The most one read takes off the connection (and the most the stream buffers)."""

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

    async def connect(self, timeout: float
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(asyncio.open_connection(
            self.host, self.port, ssl=self._ssl, limit=READ_BYTES), timeout)


def _clean(value: str) -> bool:
    return value.isprintable() and "\r" not in value and "\n" not in value


class Upstream:
    """The file service's answer to one GET: `open` it (the status and headers), then
    iterate `body()`; `close` at the end, or when the client goes away."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 read_seconds: float) -> None:
        self._reader, self._writer = reader, writer
        self._read_seconds = read_seconds
        self._parser = httptools.HttpResponseParser(self)
        self._head = 0
        self._pieces: list[bytes] = []
        self._headed = self._complete = False
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []

    @classmethod
    async def open(cls, endpoint: Endpoint, path: str, params: Sequence[tuple[str, str]],
                   headers: Mapping[str, str], *, connect_seconds: float,
                   read_seconds: float) -> Upstream:
        """Asks for `path?params` with `headers`; returns once the answer's head is in.
        OSError or TimeoutError when the file service cannot be reached, UpstreamBroken
        when what it says is not an answer."""
        reader, writer = await endpoint.connect(connect_seconds)
        upstream = cls(reader, writer, read_seconds)
        try:
            target = path + (f"?{urlencode(params)}" if params else "")
            lines = [f"GET {target} HTTP/1.1", f"Host: {endpoint.authority}",
                     "Connection: close",
                     *(f"{name}: {value}" for name, value in headers.items()
                       if _clean(name) and _clean(value))]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            while not upstream._headed:
                await upstream._read()
        except BaseException:
            upstream.close()
            raise
        return upstream

    async def body(self) -> AsyncIterator[bytes]:
        """The answer's body, piece by piece as it arrives (chunked or not)."""
        while True:
            if self._pieces:
                pieces, self._pieces = self._pieces, []
                yield pieces[0] if len(pieces) == 1 else b"".join(pieces)
            if self._complete:
                return
            await self._read()

    async def _read(self) -> None:
        data = await asyncio.wait_for(self._reader.read(READ_BYTES), self._read_seconds)
        if not data:
            raise UpstreamBroken("the file service closed the connection before the end of "
                                 "its answer")
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, UpstreamBroken):  # raised by a callback below
                raise exc.__context__ from None
            raise UpstreamBroken(f"the file service's answer is not HTTP: {exc}") from None
        if not self._headed and self._head > HEAD_BYTES:
            raise UpstreamBroken(f"the file service's answer has a head over {HEAD_BYTES} "
                                 "bytes")

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            self._writer.close()

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

    def on_message_complete(self) -> None:
        self._complete = True
