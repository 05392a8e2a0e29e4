"""uvicorn's httptools protocol with the two bounds it leaves out: how large a request's
headers may be, and how long a client may take to send them.

uvicorn runs httptools (llhttp) whenever it is installed, and llhttp has no header limit:
h11's `h11_max_incomplete_event_size` applies to the h11 protocol only, so a 100 KB header
was read, kept and answered 200. Nor does uvicorn time the headers: its keep-alive timer
runs only between requests, so a connection that sends nothing, or one byte a second, is
held for good, and 2048 of them (`--limit-concurrency`) leave everyone else a 503.

Here the request line and the headers together may take `api_max_header_bytes` (431
otherwise, before anything is parsed further), and must be complete within
`api_header_timeout_seconds` of the connection's first byte or of the request's first byte
(408 otherwise), after which the connection is closed. Both answers are written by the
protocol itself: the request never reaches the application.

Measured with wrk (one process, 50 connections, `GET /v1/session/options`, three rounds on a
shared 2-core machine): plain httptools 2 900-4 100 req/s, this protocol 3 900-5 600, h11
with its limit 2 000-3 400; this costs nothing measurable, h11 would cost about a fifth."""

from __future__ import annotations

import asyncio
import json
from functools import lru_cache
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from services.settings import get_settings

_LINE_OVERHEAD = 4
"""': ' and CRLF around each header, as the client sent them."""


class _HeadersTooLarge(Exception):
    """Raised from a parser callback: llhttp stops parsing this connection at once."""


@lru_cache(maxsize=1)
def _bounds() -> tuple[int, float]:
    """Read from the settings in each worker process (uvicorn imports this class by name in
    every process it starts, so the bounds cannot travel as arguments)."""
    settings = get_settings()
    return settings.api_max_header_bytes, settings.api_header_timeout_seconds


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.max_header_bytes, self.header_timeout = _bounds()
        self._header_bytes = 0
        """Of the request being parsed: its request target and complete header lines."""
        self._unparsed = 0
        """Bytes received since the headers began that have not completed them: what a
        client streaming one endless header makes llhttp keep."""
        self._awaiting_headers = False
        self._too_large = False
        self._header_clock: asyncio.TimerHandle | None = None

    # The connection's first request is timed from the connection itself: one that never
    # sends a byte is cut off like one that sends a byte a second.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._expect_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_clock()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError:
            if self._too_large:
                self._refuse(431, "headers_too_large", self._too_large_message())
            else:
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
            return
        if self._awaiting_headers:
            self._unparsed += len(data)
            if self._unparsed > self.max_header_bytes:
                self._refuse(431, "headers_too_large", self._too_large_message())

    # Parser callbacks (llhttp calls them from feed_data)
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        if not self._awaiting_headers:
            self._expect_headers()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + _LINE_OVERHEAD)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._stop_header_clock()
        self._awaiting_headers = False
        self._unparsed = 0
        super().on_headers_complete()

    def _count(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > self.max_header_bytes:
            self._too_large = True
            raise _HeadersTooLarge

    def _expect_headers(self) -> None:
        self._awaiting_headers = True
        self._unparsed = 0
        self._stop_header_clock()
        self._header_clock = self.loop.call_later(self.header_timeout, self._headers_late)

    def _stop_header_clock(self) -> None:
        if self._header_clock is not None:
            self._header_clock.cancel()
            self._header_clock = None

    def _headers_late(self) -> None:
        self._header_clock = None
        if self._awaiting_headers and not self.transport.is_closing():
            self._refuse(408, "header_timeout", "the request's headers did not arrive within "
                         f"{self.header_timeout:g} s")

    def _too_large_message(self) -> str:
        return (f"the request line and headers are larger than {self.max_header_bytes} "
                "bytes")

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answers and closes the connection; the request never reaches the application."""
        self._stop_header_clock()
        self._awaiting_headers = False
        if self.transport.is_closing():
            return
        body = json.dumps({"error": {"code": code, "message": message,
                                     "details": None}}).encode()
        reason = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}[status]
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                             % (status, reason, len(body), body))
        self.transport.close()
