"""The door's own rules, on the real gate with a stand-in application: a request reads its
credentials once (a repeated one is refused), a caller without credentials sends a small
body at most and takes at most half the process's slots, and the portal session's routes
take none."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from redis import Redis

from api.callers import Callers
from api.gate import ANONYMOUS_MAX_BODY_BYTES, RELEASE_SLOT, RequestGate
from services.auth.portal_sessions import COOKIE, SessionSeal
from services.auth.portal_signouts import PortalSignOuts
from tests.unit.api.test_token_checks import _run


class Held:
    """An application whose requests stay inside until released."""

    def __init__(self) -> None:
        self.inside: list[str] = []
        self.release = asyncio.Event()
        self.bodies: list[bytes] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.inside.append(scope["path"])
        message = await receive()
        self.bodies.append(message.get("body", b""))
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def _gate(app: Any, limit: int = 4) -> RequestGate:
    callers = Callers(checks=None, seal=SessionSeal(secrets.token_bytes(32)),
                      sign_outs=PortalSignOuts(Redis()), cookie=COOKIE, trusted_proxies=[])
    return RequestGate(app, callers=callers, clock=lambda: None,  # type: ignore[arg-type,return-value]
                       limit=limit, per_client=limit, max_body_bytes=1024 * 1024,
                       body_timeout=1, send_timeout=1)


def _scope(path: str = "/v1/jobs", client: str = "192.0.2.1",
           headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": path, "headers": headers or [],
            "client": (client, 5000)}


def _body(data: bytes) -> Any:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": data, "more_body": False}

    return receive


class Answers:
    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.bodies: list[bytes] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.statuses.append(message["status"])
        else:
            self.bodies.append(message.get("body", b""))


def test_a_repeated_credential_header_is_refused_before_anything_reads_it() -> None:
    app = Held()
    gate = _gate(app)

    async def scenario() -> Answers:
        answers = Answers()
        for name in (b"x-auth-token", b"x-project-id", b"cookie", b"content-length"):
            await gate(_scope(headers=[(name, b"one"), (b"x-other", b""), (name, b"")]),
                       _body(b""), answers)
        return answers

    answers = _run(scenario())
    assert answers.statuses == [400] * 4
    assert all(b"repeated_header" in body for body in answers.bodies)
    assert app.inside == []


def test_a_caller_without_credentials_sends_a_small_body_at_most() -> None:
    app = Held()
    app.release.set()
    gate = _gate(app)
    large = b"x" * (ANONYMOUS_MAX_BODY_BYTES + 1)

    async def scenario() -> Answers:
        answers = Answers()
        length = [(b"content-length", str(len(large)).encode())]
        await gate(_scope(headers=length), _body(large), answers)
        await gate(_scope(headers=[*length, (b"x-project-id", b"project-a")]), _body(large),
                   answers)
        return answers

    answers = _run(scenario())
    assert answers.statuses == [413, 200]
    assert app.bodies == [large]


def test_callers_without_credentials_take_at_most_half_the_slots() -> None:
    app = Held()
    gate = _gate(app, limit=4)

    async def scenario() -> list[str]:
        anonymous = [asyncio.ensure_future(gate(_scope(f"/anonymous-{i}", f"192.0.2.{i}"),
                                                _body(b""), Answers()))
                     for i in range(1, 9)]
        await asyncio.sleep(0.05)
        named = asyncio.ensure_future(gate(_scope("/named", "192.0.2.99",
                                                  [(b"x-project-id", b"project-a")]),
                                           _body(b""), Answers()))
        await asyncio.sleep(0.05)
        inside = list(app.inside)
        app.release.set()
        await asyncio.gather(*anonymous, named)
        return inside

    inside = _run(scenario())
    assert sorted(inside) == ["/anonymous-1", "/anonymous-2", "/named"]


def test_the_portal_session_routes_take_no_slot() -> None:
    app = Held()
    gate = _gate(app, limit=1)

    async def scenario() -> list[str]:
        busy = asyncio.ensure_future(gate(_scope("/v1/jobs", headers=[
            (b"x-project-id", b"project-a")]), _body(b""), Answers()))
        await asyncio.sleep(0.05)
        sign_in = asyncio.ensure_future(gate(_scope("/v1/session"), _body(b"{}"), Answers()))
        switch = asyncio.ensure_future(gate(_scope("/v1/session/project"), _body(b"{}"),
                                            Answers()))
        await asyncio.sleep(0.05)
        inside = list(app.inside)
        app.release.set()
        await asyncio.gather(busy, sign_in, switch)
        return inside

    assert _run(scenario()) == ["/v1/jobs", "/v1/session", "/v1/session/project"]


def test_an_answer_that_gives_its_slot_back_lets_the_next_request_in() -> None:
    """A streaming answer (a file download) calls RELEASE_SLOT before its first byte: the
    process's only slot, and its caller's, serve the next request while it streams."""
    streaming = asyncio.Event()
    done = asyncio.Event()
    inside: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        inside.append(scope["path"])
        if scope["path"] == "/download":
            await scope["state"][RELEASE_SLOT]()
            await scope["state"][RELEASE_SLOT]()  # a second call does nothing
            streaming.set()
            await done.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    gate = _gate(app, limit=1)
    headers = [(b"x-project-id", b"project-a")]

    async def scenario() -> list[str]:
        download = asyncio.ensure_future(gate(_scope("/download", headers=headers),
                                              _body(b""), Answers()))
        await asyncio.wait_for(streaming.wait(), 5)
        await asyncio.wait_for(gate(_scope("/v1/jobs", headers=headers), _body(b""),
                                    Answers()), 5)
        done.set()
        await download
        return inside

    assert _run(scenario()) == ["/download", "/v1/jobs"]
    assert gate._clients == {}
