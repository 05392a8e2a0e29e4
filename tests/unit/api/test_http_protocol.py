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
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from api import http_protocol
from api.http_protocol import BoundedHttpToolsProtocol

MAX_HEADER_BYTES = 2048
HEADER_TIMEOUT = 0.3
SEND_TIMEOUT = 0.3

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class Transport(asyncio.Transport):
    """What a socket's transport tells the protocol, and what the protocol did with it."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = self.aborted = False
        self.protocol: BoundedHttpToolsProtocol | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def close(self) -> None:
        if not self.closed and self.protocol is not None:
            self.closed = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def abort(self) -> None:
        self.aborted = True
        self.close()

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("192.0.2.1", 40000), "sockname": ("127.0.0.1", 8787)}.get(
            name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high = high

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def answering(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the body, answers 200 with the headers it was given."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    names = b",".join(name for name, _ in scope["headers"])
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(names)).encode())]})
    await send({"type": "http.response.body", "body": names})


def _connect(app: App, monkeypatch: pytest.MonkeyPatch) -> tuple[BoundedHttpToolsProtocol,
                                                                  Transport]:
    monkeypatch.setattr(http_protocol, "_bounds",
                        lambda: (MAX_HEADER_BYTES, HEADER_TIMEOUT, SEND_TIMEOUT))
    config = Config(app=app, lifespan="off", timeout_keep_alive=60)
    protocol = BoundedHttpToolsProtocol(config, ServerState(), {},
                                        _loop=asyncio.get_running_loop())
    transport = Transport()
    transport.protocol = protocol
    protocol.connection_made(transport)
    return protocol, transport


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def _run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(scenario())  # type: ignore[arg-type]


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


def test_trailers_are_refused_and_never_reach_the_application(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[bytes]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append([name for name, _ in scope["headers"]])
        await answering(scope, receive, send)

    async def scenario() -> None:
        protocol, transport = _connect(app, monkeypatch)
        protocol.data_received(b"POST /v1/plans HTTP/1.1\r\nHost: cairn\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n"
                               b"X-Auth-Token: from-a-trailer\r\n\r\n")
        await _settle()
        assert transport.written.startswith(b"HTTP/1.1 400 "), bytes(transport.written)
        assert b"trailers_refused" in transport.written
        assert transport.closed
        assert all(b"x-auth-token" not in names for names in seen)

    _run(scenario)


def test_an_endless_trailer_is_cut_off_at_the_header_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> int:
        protocol, transport = _connect(answering, monkeypatch)
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


def test_a_chunk_size_line_that_never_ends_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> int:
        protocol, transport = _connect(answering, monkeypatch)
        protocol.data_received(b"POST /v1/session HTTP/1.1\r\nHost: cairn\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n1;ext=")
        reads = 0
        while not transport.closed and reads < 1000:
            protocol.data_received(b"e" * 1024)
            reads += 1
        return reads

    assert _run(scenario) <= MAX_HEADER_BYTES // 1024 + 2


def test_small_chunks_and_a_body_followed_by_the_next_request_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        protocol, transport = _connect(answering, monkeypatch)
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


def test_blank_lines_between_requests_do_not_stop_the_header_clock(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> float:
        protocol, transport = _connect(answering, monkeypatch)
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


def test_a_refusal_is_never_written_into_an_answer_under_way(
        monkeypatch: pytest.MonkeyPatch) -> None:
    release = asyncio.Event()

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"4")]})
        await send({"type": "http.response.body", "body": b"pa", "more_body": True})
        await release.wait()
        await send({"type": "http.response.body", "body": b"rt"})

    async def scenario() -> None:
        protocol, transport = _connect(slow, monkeypatch)
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


def test_an_answer_the_client_does_not_take_ends_the_connection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        protocol, transport = _connect(answering, monkeypatch)
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
