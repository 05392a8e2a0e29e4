"""uvicorn's httptools protocol with the bounds it leaves out, so that every phase of a
connection has a deadline and a size that nothing a client sends can reset or stretch. Each
server says its own bounds (`HttpBounds`) in a subclass: cairn-api's `api/http_protocol.py`,
cairn-files' `worker/files/http_protocol.py`.

uvicorn runs httptools (llhttp) whenever it is installed, and llhttp has no header limit:
h11's `h11_max_incomplete_event_size` applies to the h11 protocol only, so a 100 KB header
was read, kept and answered 200. Nor does uvicorn time anything but idle keep-alive
connections, and any byte (a blank line, which llhttp skips between requests) stopped that
timer: a connection sending "\\r\\n" every few seconds was held for good. Here:

- **Headers**: a request's line and headers must be complete within `header_seconds` of the
  connection's opening or of the end of the previous answer (of the request's first byte,
  for a request that began while the previous one was being answered); only complete
  headers stop that clock (408 otherwise). Its line and header lines together may take
  `max_header_bytes` (431).
- **Everything that is not a body**: the bytes of a request that are not its body (its
  line and headers, blank lines before it, chunk sizes and extensions) may take
  `max_header_bytes`, and `_CHUNK_FRAMING` more per chunk (431). httptools builds a
  header's value by appending each read to it, and uvicorn a request target likewise: one
  endless trailer after a chunked body (77 MB in 15 s) stalled the event loop for 16 s.
- **Trailers** are refused (400): no route reads them, and uvicorn appended them to the
  request's headers after the application's door had read those.
- **The answer** (unless `send_seconds` is None): whatever the kernel cannot take at once
  must be taken within `send_seconds`, or the connection is aborted. uvicorn waits for a
  client to take its answer's last bytes before it closes a connection, however long that
  takes, and the connection counts against `--limit-concurrency` meanwhile: three clients
  that stopped reading /api-docs/swagger-ui-bundle.js kept the connections of a process
  limited to four.

The protocol writes its own refusals (never into another answer still being written: the
connection is aborted instead) as Cairn's error envelope, and closes the connection; the
request never reaches the application. It relies on these parts of uvicorn's
`HttpToolsProtocol`, checked by tests/unit/services/test_bounded_http.py for the uvicorn
versions pyproject.toml allows: the parser callbacks, `send_400_response`,
`on_response_complete`, `pause_writing`, `resume_writing`, and the `parser`, `loop`,
`transport`, `cycle`, `pipeline` attributes.

Measured with wrk (one process, 50 connections, `GET /v1/session/options`, three rounds on a
shared 2-core machine): plain httptools 2 900-4 100 req/s, this protocol 3 900-5 600, h11
with its limit 2 000-3 400; this costs nothing measurable, h11 would cost about a fifth."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import struct
from dataclasses import dataclass
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

log = logging.getLogger(__name__)

_LINE_OVERHEAD = 4
"""': ' and CRLF around each header, as the client sent them."""
_CHUNK_FRAMING = 64
"""What a chunk may add besides its data: its size in hex and two CRLFs take at most 20
bytes; the rest leaves room for a chunk extension."""
_REASONS = {400: b"Bad Request", 408: b"Request Timeout",
            431: b"Request Header Fields Too Large"}


class _Stop(Exception):
    """Raised from a parser callback: llhttp stops parsing this connection at once, and
    uvicorn calls `send_400_response`, which answers `_refusal`."""


@dataclass(frozen=True)
class HttpBounds:
    max_header_bytes: int
    """A request's line and headers together; and, apart, what else of it is not its body."""
    header_seconds: float
    """Until a request's headers are complete."""
    send_seconds: float | None
    """For the client to take what the kernel could not take at once; None: no clock (a
    server whose one client pauses its reading by design and has its own deadlines)."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """The bounded protocol; a server's subclass says its `bounds`."""

    @classmethod
    def bounds(cls) -> HttpBounds:
        """Read in each process that serves (uvicorn makes its protocol from the class, in
        every worker process it starts, so bounds cannot travel as arguments)."""
        raise NotImplementedError

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        bounds = self.bounds()
        self.max_header_bytes = bounds.max_header_bytes
        self.header_timeout = bounds.header_seconds
        self.send_timeout = bounds.send_seconds
        self._header_bytes = 0
        """Of the request being parsed: its target and complete header lines."""
        self._not_body = 0
        """Of the request being parsed (or of the blank lines since the last one): bytes
        that are not its body, counted for each read that neither began nor ended one (the
        callbacks count those, and a read is bounded by the event loop's buffer)."""
        self._chunks = 0
        self._in_message = False
        self._headers_done = False
        self._read_body = 0
        """Body bytes of the read being parsed."""
        self._boundary = False
        """A request began or ended within the read being parsed."""
        self._refusal: tuple[int, str, str] | None = None
        self._header_clock: asyncio.TimerHandle | None = None
        self._write_clock: asyncio.TimerHandle | None = None
        self._open_cycles: list[RequestResponseCycle] = []
        """Requests of this connection not answered yet: the one being answered and those
        pipelined behind it. uvicorn tells only the newest when the connection is lost, so
        the one being answered went on writing into a closed transport."""

    # The connection's first request is timed from the connection itself: one that never
    # sends a byte is cut off like one that sends a byte a second.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # Every byte the kernel cannot take at once starts the write clock (pause_writing),
        # not only those past 64 KiB: a connection closing with 16 KiB unsent waited for
        # them as long as the client liked.
        if self.send_timeout is not None:
            transport.set_write_buffer_limits(high=0)
        self._start_header_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_clock()
        self._stop_write_clock()
        for cycle in self._open_cycles:
            if not cycle.response_complete:
                cycle.disconnected = True
                cycle.message_event.set()
        self._open_cycles.clear()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._read_body = 0
        self._boundary = False
        super().data_received(data)  # parser errors: send_400_response
        if self._boundary or self.transport.is_closing():
            return
        self._not_body += len(data) - self._read_body
        if self._not_body > self.max_header_bytes + _CHUNK_FRAMING * self._chunks:
            self._refuse(431, "headers_too_large", self._too_large_message())

    def send_400_response(self, msg: str) -> None:
        status, code, message = self._refusal or (
            400, "bad_request", "the request is not valid HTTP/1.1")
        self._refuse(status, code, message)

    # Parser callbacks (llhttp calls them from feed_data)
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = self._not_body = self._chunks = 0
        self._in_message, self._headers_done, self._boundary = True, False, True
        if self._header_clock is None:  # begun while the previous answer was being sent
            self._start_header_clock()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._headers_done:
            self._refusal = (400, "trailers_refused", "the request's chunked body ends with "
                             "trailer fields, which Cairn does not accept; send them as headers")
            raise _Stop
        self._count(len(name) + len(value) + _LINE_OVERHEAD)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._stop_header_clock()
        self._headers_done = True
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not None and self.cycle is not before:
            self._open_cycles.append(self.cycle)

    def on_chunk_header(self) -> None:
        self._chunks += 1

    def on_body(self, body: bytes) -> None:
        self._read_body += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._in_message, self._boundary, self._not_body = False, True, 0
        super().on_message_complete()

    def on_response_complete(self) -> None:
        self._open_cycles = [c for c in self._open_cycles if not c.response_complete]
        pipelined = bool(self.pipeline)  # super starts the next one: its headers are in
        super().on_response_complete()
        if not pipelined and not self._in_message and not self.transport.is_closing():
            self._start_header_clock()  # the next request's headers are due

    # Flow control: the transport pauses writing while bytes wait for the client.
    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_clock is None and self.send_timeout is not None:
            self._write_clock = self.loop.call_later(self.send_timeout, self._not_reading)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stop_write_clock()

    def _not_reading(self) -> None:
        self._write_clock = None
        log.info("%s did not take its answer within %g s: connection reset",
                 self.client[0] if self.client else "a client", self.send_timeout)
        # A reset, not a close: a closed socket keeps what the kernel could not send (up to
        # 4 MiB) for minutes more, trying to deliver it to a client that does not read.
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def _stop_write_clock(self) -> None:
        if self._write_clock is not None:
            self._write_clock.cancel()
            self._write_clock = None

    def _count(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > self.max_header_bytes:
            self._refusal = (431, "headers_too_large", self._too_large_message())
            raise _Stop

    def _start_header_clock(self) -> None:
        self._stop_header_clock()
        self._header_clock = self.loop.call_later(self.header_timeout, self._headers_late)

    def _stop_header_clock(self) -> None:
        if self._header_clock is not None:
            self._header_clock.cancel()
            self._header_clock = None

    def _headers_late(self) -> None:
        self._header_clock = None
        self._refuse(408, "header_timeout", "the request's headers did not arrive within "
                     f"{self.header_timeout:g} s")

    def _too_large_message(self) -> str:
        return (f"the request's line and headers (or what else of it is not its body: blank "
                f"lines, chunk sizes, extensions) are larger than {self.max_header_bytes} "
                "bytes")

    def _answer_owed(self) -> bool:
        """An answer to a request before the one refused is not finished: the refusal
        cannot be written ahead of it, nor into it."""
        if self.pipeline:
            return True
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return False
        refusing_its_request = self._in_message and self._headers_done
        return cycle.response_started or not refusing_its_request

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answers and closes the connection; the request never reaches the application."""
        self._stop_header_clock()
        if self.transport.is_closing():
            return
        if self._answer_owed():
            self.transport.abort()
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            # The refused request's own answer has not begun: this is its answer, and
            # whatever the application says later is dropped, as for a client gone.
            cycle.disconnected = True
            cycle.message_event.set()
        body = json.dumps({"error": {"code": code, "message": message,
                                     "details": None}}).encode()
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                             % (status, _REASONS[status], len(body), body))
        self.transport.close()
