"""The door of one cairn-api process: what a request must do before it may take a thread.
(Its headers were bounded in size and time before it got here, and its connection's every
phase has a deadline: `api/http_protocol.py`.)

1. Its headers are read once, here: a request that repeats a header carrying a credential
   or framing its body (X-Auth-Token, X-Project-Id, X-Roles, Cookie, X-CSRF-Token,
   Content-Length, Transfer-Encoding) is refused (400), and the application sees the very
   headers the door read. Before, the door read the last of two X-Auth-Token headers and
   the routes the first: a garbage token then went to Keystone from inside a slot.
2. It says who it is (`api/callers.py`): a Keystone token is validated now, from the cache
   at once or by a bounded, timed Keystone check in a lane of its own, and a token that
   cannot be used is answered here (401, 403, 429, 503) without ever taking a slot, or
   reading its body.
3. Its body arrives whole, within `api_max_body_bytes` (`ANONYMOUS_MAX_BODY_BYTES` for a
   caller without credentials) and `api_body_timeout_seconds` (413 and 408 otherwise).
   Bodies are read here, in the event loop, where a slow or stalled upload costs a buffer
   and nothing else: before, the in-flight slot was taken first and ten connections that
   never finished their body blocked the API for everyone.
4. It takes one of its caller's slots (`api_client_threads`; the caller is the validated
   project and user, or the client network for anonymous requests), so one caller,
   however busy, leaves slots to the others, and varying a credential makes no new caller.
   Anonymous callers together take at most half the process's slots: a flood of them
   leaves the other half to callers with credentials.
5. It takes one of the process's `api_threads` slots. Each admitted request holds a
   database session from its dependency's setup to its cleanup on the thread pool: without a
   bound, a burst can take every pooled connection while the requests that would give one
   back wait for a thread. The portal session's routes take none: they use no database and
   make their blocking calls in lanes of their own (`api/lanes.py`, `SESSION_PATH`).
6. Its client takes each part of the answer within `api_send_timeout_seconds`, or the
   connection is closed and the slot given back: a client that stopped reading held it for
   good (a 240 KB /openapi.json does not fit the socket's buffers).
7. An answer that streams for long (a file download, `api/files_proxy.py`) hands its slots
   back once its route's work is done, before its first byte: `scope["state"]
   [RELEASE_SLOT]()`. A download of an hour would otherwise hold a slot, and one of its
   caller's, for that hour; what bounds those is the file routes' own per-project limit.
Waiting at 2, 4 and 5 is asynchronous and costs nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.callers import SESSION_PATH, Caller, Callers
from api.errors import AnswerCut, ClientNotReading
from services.clock import Clock
from services.errors import CairnError, ServiceUnavailable, TooManyRequests

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
"""As api/errors.py's for a 503."""

RELEASE_SLOT = "release_slot"
"""In a request's `scope["state"]`: an awaitable that gives its slots back, at once and
once (later calls do nothing); an answer that streams for long calls it before streaming."""

SINGLE_HEADERS = frozenset({b"x-auth-token", b"x-project-id", b"x-roles", b"cookie",
                            b"x-csrf-token", b"content-length", b"transfer-encoding"})
"""Headers a request may send once: two values would leave it to each reader which counts."""

ANONYMOUS_MAX_BODY_BYTES = 16 * 1024
"""A caller without credentials has nothing to send but a sign-in (a few hundred bytes):
2048 connections of `api_max_body_bytes` each would have been 2 GiB of buffers."""


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str,
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.retry_after = retry_after




class RequestGate:
    def __init__(self, app: ASGIApp, *, callers: Callers, clock: Clock, limit: int,
                 per_client: int, max_body_bytes: int, body_timeout: float,
                 send_timeout: float) -> None:
        self.app = app
        self.callers = callers
        self.clock = clock
        self.limit = limit
        self.per_client = per_client
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.send_timeout = send_timeout
        self._slots: asyncio.Semaphore | None = None
        self._anonymous: asyncio.Semaphore | None = None
        self._clients: dict[str, tuple[asyncio.Semaphore, int]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            headers = _read_headers(scope)
            caller = await self._caller(scope, headers)
            body = await self._read_body(headers, receive, caller)
        except _Refused as refused:
            await _answer(send, refused)
            return
        scope.setdefault("state", {})["caller"] = caller  # for api/deps.py's get_context
        replay, timed = _replay(body, receive), self._timed(send)
        if _sessions_route(scope["path"]):
            await self._unslotted(caller, scope, replay, timed)
            return
        if self._slots is None:  # made on first use, inside the server's event loop
            self._slots = asyncio.Semaphore(self.limit)
            self._anonymous = asyncio.Semaphore(max(1, self.limit // 2))
        assert self._anonymous is not None
        key = caller.key
        client = self._client(key)
        shared = self._anonymous if caller.anonymous else contextlib.nullcontext()
        try:
            async with contextlib.AsyncExitStack() as slot:
                for semaphore in (client, shared, self._slots):
                    await slot.enter_async_context(semaphore)
                scope["state"][RELEASE_SLOT] = slot.aclose
                await self.app(scope, replay, timed)
        except AnswerCut as exc:
            # The server closes a connection whose answer was left incomplete.
            log.warning("%s: %s", caller.address, exc)
        finally:
            self._release_client(key)

    async def _unslotted(self, caller: Caller, scope: Scope, receive: Receive,
                         send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except AnswerCut as exc:
            log.warning("%s: %s", caller.address, exc)

    async def _caller(self, scope: Scope, headers: dict[bytes, bytes]) -> Caller:
        try:
            return await self.callers.find(scope, headers, self.clock())
        except CairnError as exc:
            raise _Refused(exc.status_code, exc.code, exc.message, _retry_after(exc)) from None

    def _timed(self, send: Send) -> Send:
        async def timed(message: Message) -> None:
            try:
                await asyncio.wait_for(send(message), self.send_timeout)
            except TimeoutError:
                raise ClientNotReading(f"the client took no part of its answer within "
                                       f"{self.send_timeout:g} s") from None

        return timed

    async def _read_body(self, headers: dict[bytes, bytes], receive: Receive,
                         caller: Caller) -> bytes | None:
        length_text = headers.get(b"content-length")
        if length_text is None and b"chunked" not in headers.get(b"transfer-encoding", b""):
            return None
        limit = min(self.max_body_bytes, ANONYMOUS_MAX_BODY_BYTES) if caller.anonymous \
            else self.max_body_bytes
        if length_text is not None:
            if not length_text.isdigit():
                raise _Refused(400, "bad_request", "Content-Length is not a number")
            if int(length_text) > limit:
                raise _Refused(413, "body_too_large", _too_large(limit))
        try:
            return await asyncio.wait_for(self._collect(receive, limit), self.body_timeout)
        except TimeoutError:
            raise _Refused(408, "body_timeout",
                           f"the request body did not arrive within {self.body_timeout:g} s"
                           ) from None

    @staticmethod
    async def _collect(receive: Receive, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Refused(400, "client_disconnected", "the client went away")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _Refused(413, "body_too_large", _too_large(limit))
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _client(self, key: str) -> asyncio.Semaphore:
        semaphore, users = self._clients.get(key, (None, 0))
        if semaphore is None:
            semaphore = asyncio.Semaphore(self.per_client)
        self._clients[key] = (semaphore, users + 1)
        return semaphore

    def _release_client(self, key: str) -> None:
        semaphore, users = self._clients[key]
        if users <= 1:
            del self._clients[key]  # the table holds only clients with requests open
        else:
            self._clients[key] = (semaphore, users - 1)


def _too_large(limit: int) -> str:
    return f"the request body is larger than {limit} bytes"


def _read_headers(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers, each once (see `SINGLE_HEADERS`); the application gets a copy
    of the list the door read, which nothing can add to afterwards."""
    raw = list(scope["headers"])
    headers: dict[bytes, bytes] = {}
    for name, value in raw:
        if name in headers and name in SINGLE_HEADERS:
            raise _Refused(400, "repeated_header", f"the request sends its "
                           f"{name.decode('latin-1')} header more than once; send it once")
        headers.setdefault(name, value)
    scope["headers"] = raw
    return headers


def _sessions_route(path: str) -> bool:
    return path == SESSION_PATH or path.startswith(SESSION_PATH + "/")


def _retry_after(exc: CairnError) -> int | None:
    if isinstance(exc, TooManyRequests):
        return exc.retry_after
    return RETRY_AFTER_SECONDS if isinstance(exc, ServiceUnavailable) else None


def _replay(body: bytes | None, receive: Receive) -> Callable[[], Awaitable[Message]]:
    pending = body is not None

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body or b"", "more_body": False}
        return await receive()

    return replay


async def _answer(send: Send, refused: _Refused) -> None:
    content = json.dumps({"error": {"code": refused.code, "message": refused.message,
                                    "details": None}}).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(content)).encode()),
               (b"connection", b"close")]
    if refused.retry_after is not None:
        headers.append((b"retry-after", str(refused.retry_after).encode()))
    await send({"type": "http.response.start", "status": refused.status,
                "headers": headers})
    await send({"type": "http.response.body", "body": content})
