"""cairn-api serves with the bounded protocol (tests/unit/services/test_bounded_http.py has
its rules) under the API's own settings: headers past `api_max_header_bytes` are 431 and
headers not complete within `api_header_timeout_seconds` are 408, before the application
sees anything."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from api import http_protocol
from api.http_protocol import ApiHttpProtocol
from services.bounded_http import HttpBounds
from services.settings import Settings
from tests.unit.services.http_fakes import (
    answering,
    connect,
    run,
    settle,
    trickled_head,
)

SETTINGS = Settings(auth_strategy="noauth", environment="development",
                    api_max_header_bytes=2048, api_header_timeout_seconds=0.3,
                    api_send_timeout_seconds=7.0)


@pytest.fixture(autouse=True)
def _api_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(http_protocol, "get_settings", lambda: SETTINGS)
    http_protocol._bounds.cache_clear()
    yield
    http_protocol._bounds.cache_clear()


def test_the_protocol_takes_the_apis_settings() -> None:
    assert ApiHttpProtocol.bounds() == HttpBounds(2048, 0.3, 7.0)


def test_headers_past_the_bound_are_431_and_never_reach_the_application() -> None:
    seen: list[Any] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope)
        await answering(scope, receive, send)

    async def scenario() -> bytes:
        protocol, transport = connect(ApiHttpProtocol, app)
        protocol.data_received(b"GET /v1/plans HTTP/1.1\r\nHost: cairn\r\nX-Big: "
                               + b"b" * 4096 + b"\r\n\r\n")
        await settle()
        assert transport.closed
        return bytes(transport.written)

    written = run(scenario)
    assert written.startswith(b"HTTP/1.1 431 "), written[:80]
    assert not seen


def test_headers_sent_a_byte_at_a_time_are_408_at_the_deadline() -> None:
    written, took = trickled_head(
        ApiHttpProtocol, b"GET /v1/plans HTTP/1.1\r\nHost: cairn\r\nX-Slow: " + b"s" * 100)
    assert written.startswith(b"HTTP/1.1 408 "), written[:80]
    assert took < 0.3 * 2
