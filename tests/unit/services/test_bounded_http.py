"""The bounded protocol's rules, driven byte by byte through uvicorn's real httptools protocol
and parser on a transport that records what the server writes: the parts of uvicorn it
builds on exist, trailers are refused, what is not a body is bounded however it is split
into reads (and a body is never taken for headers), blank lines do not stop the header
clock, a refusal is never written into another answer, and an answer the client does not
take ends the connection."""

from __future__ import annotations

import asyncio
import inspect
import re
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from services.bounded_http import BoundedHttpToolsProtocol, HttpBounds
from tests.unit.services.http_fakes import App, Transport, answering, connect
from tests.unit.services.http_fakes import run as _run
from tests.unit.services.http_fakes import settle as _settle

MAX_HEADER_BYTES = 2048
HEADER_TIMEOUT = 0.3
SEND_TIMEOUT = 0.3


class Bounded(BoundedHttpToolsProtocol):
    @classmethod
    def bounds(cls) -> HttpBounds:
        return HttpBounds(MAX_HEADER_BYTES, HEADER_TIMEOUT, SEND_TIMEOUT)


def _connect(app: App) -> tuple[BoundedHttpToolsProtocol, Transport]:
    return connect(Bounded, app)


def test_the_parts_of_uvicorn_the_protocol_builds_on_exist() -> None:
    # pyproject.toml bounds uvicorn; this says what breaks first when a new one moves them.
    for name in ("connection_made", "connection_lost", "data_received", "send_400_response",
                 "on_message_begin", "on_url", "on_header", "on_headers_complete",
                 "on_body", "on_message_complete", "on_response_complete", "pause_writing",
                 "resume_writing"):
        assert callable(getattr(HttpToolsProtocol, name, None)), name
    assert list(inspect.signature(HttpToolsProtocol.__init__).parameters) == [
        "self", "config", "server_state", "app_state", "_loop"]
    protocol_source = inspect.getsource(HttpToolsProtocol)
    for attribute in ("self.parser", "self.loop", "self.transport", "self.cycle",
                      "self.pipeline", "self.client", "self.flow"):
        assert re.search(rf"{attribute}\b(: [^=]+)? =", protocol_source), attribute
    cycle_source = inspect.getsource(RequestResponseCycle.__init__)
    for attribute in ("response_started", "response_complete", "disconnected",
                      "message_event"):
        assert re.search(rf"self\.{attribute}\b(: [^=]+)? =", cycle_source), attribute
    # httptools calls on_chunk_header (the small-chunks test below shows it is counted).


def test_trailers_are_refused_and_never_reach_the_application() -> None:
    seen: list[list[bytes]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append([name for name, _ in scope["headers"]])
        await answering(scope, receive, send)

    async def scenario() -> None:
        protocol, transport = _connect(app)
        protocol.data_received(b"POST /v1/plans HTTP/1.1\r\nHost: cairn\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n"
                               b"X-Auth-Token: from-a-trailer\r\n\r\n")
        await _settle()
        assert transport.written.startswith(b"HTTP/1.1 400 "), bytes(transport.written)
        assert b"trailers_refused" in transport.written
        assert transport.closed
        assert all(b"x-auth-token" not in names for names in seen)

    _run(scenario)


def test_an_endless_trailer_is_cut_off_at_the_header_bound() -> None:
    async def scenario() -> int:
        protocol, transport = _connect(answering)
        protocol.data_received(b"POST /v1/session HTTP/1.1\r\nHost: cairn\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-T: ")
        reads = 0
        while not transport.closed and reads < 1000:
            protocol.data_received(b"a" * 1024)
            reads += 1
        await _settle()
        assert transport.written.startswith(b"HTTP/1.1 431 "), bytes(transport.written[:80])
        return reads

    # Before: nothing counted a trailer's bytes; httptools kept appending them.
    assert _run(scenario) <= MAX_HEADER_BYTES // 1024 + 1


def test_a_chunk_size_line_that_never_ends_is_cut_off() -> None:
    async def scenario() -> int:
        protocol, transport = _connect(answering)
        protocol.data_received(b"POST /v1/session HTTP/1.1\r\nHost: cairn\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n1;ext=")
        reads = 0
        while not transport.closed and reads < 1000:
            protocol.data_received(b"e" * 1024)
            reads += 1
        return reads

    assert _run(scenario) <= MAX_HEADER_BYTES // 1024 + 2


def test_small_chunks_and_a_body_followed_by_the_next_request_pass() -> None:
    async def scenario() -> None:
        protocol, transport = _connect(answering)
        # A 16 KiB body in 16-byte chunks: 1024 chunks, 5 bytes of framing each.
        chunks = b"".join(b"10\r\n" + b"x" * 16 + b"\r\n" for _ in range(1024))
        protocol.data_received(b"POST /a HTTP/1.1\r\nHost: cairn\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n")
        for start in range(0, len(chunks), 1000):
            protocol.data_received(chunks[start:start + 1000])
        protocol.data_received(b"0\r\n\r\n")
        await _settle()
        # A large body and, in the same read, the next request's first bytes (before: the
        # whole read was counted as that request's headers: a false 431).
        body = b"y" * 60_000
        protocol.data_received(b"POST /b HTTP/1.1\r\nHost: cairn\r\nContent-Length: "
                               + str(len(body)).encode() + b"\r\n\r\n" + body[:100])
        protocol.data_received(body[100:] + b"GET /c HTTP/1.1\r\nHost: ca")
        protocol.data_received(b"irn\r\n\r\n")
        for _ in range(5):
            await _settle()
        answers = bytes(transport.written).count(b"HTTP/1.1 200 OK")
        assert answers == 3, bytes(transport.written)
        assert not transport.closed

    _run(scenario)


def test_blank_lines_between_requests_do_not_stop_the_header_clock() -> None:
    async def scenario() -> float:
        protocol, transport = _connect(answering)
        protocol.data_received(b"GET /healthz HTTP/1.1\r\nHost: cairn\r\n\r\n")
        await _settle()
        assert transport.written.startswith(b"HTTP/1.1 200 OK")
        loop = asyncio.get_running_loop()
        started = loop.time()
        while not transport.closed and loop.time() - started < 10 * HEADER_TIMEOUT:
            protocol.data_received(b"\r\n")
            await asyncio.sleep(HEADER_TIMEOUT / 6)
        assert b"HTTP/1.1 408 " in transport.written
        return loop.time() - started

    # Before: each blank line stopped uvicorn's keep-alive timer, and nothing else ran.
    assert _run(scenario) < HEADER_TIMEOUT * 2


def test_a_refusal_is_never_written_into_an_answer_under_way() -> None:
    release = asyncio.Event()

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"4")]})
        await send({"type": "http.response.body", "body": b"pa", "more_body": True})
        await release.wait()
        await send({"type": "http.response.body", "body": b"rt"})

    async def scenario() -> None:
        protocol, transport = _connect(slow)
        protocol.data_received(b"GET /slow HTTP/1.1\r\nHost: cairn\r\n\r\n")
        await _settle()
        written = bytes(transport.written)
        # The next request, pipelined, with headers past the bound.
        protocol.data_received(b"GET /next HTTP/1.1\r\nX-Big: " + b"b" * 4096 + b"\r\n\r\n")
        await _settle()
        assert transport.aborted
        assert bytes(transport.written) == written  # nothing written into the answer
        release.set()
        await _settle()

    _run(scenario)


def test_an_answer_the_client_does_not_take_ends_the_connection() -> None:
    async def scenario() -> None:
        protocol, transport = _connect(answering)
        assert transport.high == 0  # any byte the kernel did not take starts the clock
        protocol.pause_writing()
        await asyncio.sleep(SEND_TIMEOUT / 2)
        protocol.resume_writing()  # the client took it in time
        await asyncio.sleep(SEND_TIMEOUT)
        assert not transport.aborted
        protocol.pause_writing()
        await asyncio.sleep(SEND_TIMEOUT * 1.5)
        # Before: uvicorn closed such a connection gracefully, which waits for the client.
        assert transport.aborted

    _run(scenario)
