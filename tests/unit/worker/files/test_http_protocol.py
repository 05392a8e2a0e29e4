"""cairn-files serves with the bounded protocol (tests/unit/services/test_bounded_http.py has
its rules), as cairn-api does: a head past its bound is 431 and one not complete within
HEADER_SECONDS is 408, before the application (and its token check) sees anything; the
largest head cairn-api sends passes; and an answer cairn-api pauses reading is not cut."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from services.bounded_http import HttpBounds
from services.settings import Settings
from tests.unit.services.http_fakes import (
    answering,
    connect,
    run,
    settle,
    trickled_head,
)
from worker.files import http_protocol
from worker.files.http_protocol import FilesHttpProtocol

SETTINGS = Settings(auth_strategy="noauth", environment="development",
                    api_max_header_bytes=1024, files_sessions=8, files_per_project=2)
BOUND = 3 * 1024 + 1024


@pytest.fixture(autouse=True)
def _files_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(http_protocol, "get_settings", lambda: SETTINGS)
    monkeypatch.setattr(http_protocol, "HEADER_SECONDS", 0.3)
    http_protocol._bounds.cache_clear()
    yield
    http_protocol._bounds.cache_clear()


def test_the_bounds_follow_the_apis_head_and_the_sessions() -> None:
    assert FilesHttpProtocol.bounds() == HttpBounds(BOUND, 0.3, None)
    assert http_protocol.connections(SETTINGS) == 8 * 2 + http_protocol.REFUSING


def _head(target: bytes, filler: int) -> bytes:
    return (b"GET " + target + b" HTTP/1.1\r\nHost: cairn-files\r\nConnection: close\r\n"
            b"accept-encoding: identity\r\nx-cairn-project: p\r\n"
            b"authorization: Bearer " + b"t" * 64 + b"\r\nX-Filler: " + b"f" * filler
            + b"\r\n\r\n")


@pytest.mark.parametrize(("size", "status"), [(BOUND - 400, 200), (BOUND + 1, 431)])
def test_a_head_past_the_bound_is_431_and_never_reaches_the_application(
        size: int, status: int) -> None:
    seen: list[Any] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope)
        await answering(scope, receive, send)

    # A query as the relay re-encodes it (each "/" three bytes), near the bound or past it.
    target = b"/internal/v1/restore-points/x/files?path=" + b"%2F" * (size // 3)

    async def scenario() -> bytes:
        protocol, transport = connect(FilesHttpProtocol, app)
        protocol.data_received(_head(target, 0))
        await settle()
        return bytes(transport.written)

    written = run(scenario)
    assert written.startswith(b"HTTP/1.1 %d " % status), written[:80]
    assert bool(seen) == (status == 200)


def test_a_header_that_never_ends_is_cut_at_the_bound() -> None:
    async def scenario() -> int:
        protocol, transport = connect(FilesHttpProtocol, answering)
        protocol.data_received(b"GET /healthz HTTP/1.1\r\nX: ")
        reads = 0
        while not transport.closed and reads < 1000:
            protocol.data_received(b"a" * 1024)
            reads += 1
        await settle()
        assert transport.written.startswith(b"HTTP/1.1 431 "), bytes(transport.written[:80])
        return reads

    # Before: uvicorn's httptools kept appending to the value as long as it came.
    assert run(scenario) <= BOUND // 1024 + 1


def test_a_client_trickling_its_head_is_408_at_the_deadline() -> None:
    written, took = trickled_head(
        FilesHttpProtocol, b"GET /healthz HTTP/1.1\r\nHost: cairn-files\r\nX-Slow: " + b"s" * 100)
    assert written.startswith(b"HTTP/1.1 408 "), written[:80]
    assert took < 0.3 * 2


def test_an_answer_the_api_pauses_reading_is_not_cut() -> None:
    async def scenario() -> None:
        protocol, transport = connect(FilesHttpProtocol, answering)
        assert transport.high is None  # uvicorn's own write buffer limits
        protocol.pause_writing()
        await asyncio.sleep(0.2)
        assert not transport.aborted
        protocol.resume_writing()

    run(scenario)
