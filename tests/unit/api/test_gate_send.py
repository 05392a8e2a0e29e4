"""The door gives a request's slot back when its client stops reading: each part of the
answer must be taken within the send timeout. (On loopback the kernel buffers 4 MiB of an
answer whatever the client does, so a real socket shows this only with larger answers.)"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from redis import Redis

from api.callers import Callers
from api.gate import RequestGate
from services.auth.portal_sessions import COOKIE, SessionSeal
from services.auth.portal_signouts import PortalSignOuts
from tests.unit.api.test_token_checks import _run


async def _streaming(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    for _ in range(3):
        await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _gate(send_timeout: float) -> RequestGate:
    callers = Callers(checks=None, seal=SessionSeal(secrets.token_bytes(32)),
                      sign_outs=PortalSignOuts(Redis()), cookie=COOKIE, trusted_proxies=[])
    return RequestGate(_streaming, callers=callers, clock=lambda: None,  # type: ignore[arg-type,return-value]
                       limit=1, per_client=1, max_body_bytes=1024, body_timeout=1,
                       send_timeout=send_timeout)


def _scope() -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": "/", "headers": [],
            "client": ("192.0.2.1", 5000)}


async def _nothing() -> dict[str, Any]:
    return {"type": "http.disconnect"}


def test_a_client_that_stops_reading_gives_its_slot_back() -> None:
    gate = _gate(send_timeout=0.2)

    async def scenario() -> float:
        stuck = asyncio.Event()
        parts = 0

        async def never_drains(message: dict[str, Any]) -> None:
            nonlocal parts
            parts += 1
            if parts > 2:  # the socket's buffers are full: the client reads nothing
                await stuck.wait()

        answered: list[dict[str, Any]] = []

        async def reads(message: dict[str, Any]) -> None:
            answered.append(message)

        started = time.monotonic()
        await gate(_scope(), _nothing, never_drains)
        # The only slot is free again: the next request is answered in full.
        await asyncio.wait_for(gate(_scope(), _nothing, reads), 1)
        assert answered[-1] == {"type": "http.response.body", "body": b"",
                                "more_body": False}
        return time.monotonic() - started

    assert _run(scenario()) < 1.0
