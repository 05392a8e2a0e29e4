"""The door of one cairn-api process: what a request must do before it may take a thread.
(Its headers were bounded in size and time before it got here: `api/http_protocol.py`.)

1. Its body arrives whole, within `api_max_body_bytes` and `api_body_timeout_seconds`
   (413 and 408 otherwise). Bodies are read here, in the event loop, where a slow or stalled
   upload costs a buffer and nothing else: before, the in-flight slot was taken first and ten
   connections that never finished their body blocked the API for everyone.
2. It says who it is (`api/callers.py`): a Keystone token is validated now, from the cache
   at once or by a bounded, timed Keystone check of its own, and a token that cannot be
   used is answered here (401, 429, 503) without ever taking a slot.
3. It takes one of its caller's slots (`api_client_threads`; the caller is the validated
   project and user, or the client's address for anonymous requests), so one caller,
   however busy, leaves slots to the others, and varying a credential makes no new caller.
4. It takes one of the process's `api_threads` slots. Each admitted request holds a
   database session from its dependency's setup to its cleanup on the thread pool: without a
   bound, a burst can take every pooled connection while the requests that would give one
   back wait for a thread.
5. Its client takes each part of the answer within `api_send_timeout_seconds`, or the
   connection is closed and the slot given back: a client that stopped reading held it for
   good (a 240 KB /openapi.json does not fit the socket's buffers).
Waiting at 2, 3 and 4 is asynchronous and costs nothing."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.callers import Callers
from api.errors import ClientNotReading
from services.clock import Clock
from services.errors import CairnError, ServiceUnavailable, TooManyRequests

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
"""As api/errors.py's for a 503."""


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


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
        self._clients: dict[str, tuple[asyncio.Semaphore, int]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        try:
            body = await self._read_body(headers, receive)
        except _Refused as refused:
            await _answer(send, refused)
            return
        try:
            caller = await self.callers.find(scope, headers, self.clock())
        except CairnError as exc:
            await _answer(send, _Refused(exc.status_code, exc.code, exc.message),
                          _retry_after(exc))
            return
        scope.setdefault("state", {})["caller"] = caller  # for api/deps.py's get_context
        if self._slots is None:  # made on first use, inside the server's event loop
            self._slots = asyncio.Semaphore(self.limit)
        key = caller.key
        client = self._client(key)
        try:
            async with client, self._slots:
                await self.app(scope, _replay(body, receive), self._timed(send))
        except ClientNotReading as exc:
            # The server closes a connection whose answer was left incomplete.
            log.warning("%s: %s", caller.address, exc)
        finally:
            self._release_client(key)

    def _timed(self, send: Send) -> Send:
        async def timed(message: Message) -> None:
            try:
                await asyncio.wait_for(send(message), self.send_timeout)
            except TimeoutError:
                raise ClientNotReading(f"the client took no part of its answer within "
                                       f"{self.send_timeout:g} s") from None

        return timed

    async def _read_body(self, headers: dict[bytes, bytes],
                         receive: Receive) -> bytes | None:
        length_text = headers.get(b"content-length")
        if length_text is None and b"chunked" not in headers.get(b"transfer-encoding", b""):
            return None
        if length_text is not None:
            if not length_text.isdigit():
                raise _Refused(400, "bad_request", "Content-Length is not a number")
            if int(length_text) > self.max_body_bytes:
                raise _Refused(413, "body_too_large", self._too_large())
        try:
            return await asyncio.wait_for(self._collect(receive), self.body_timeout)
        except TimeoutError:
            raise _Refused(408, "body_timeout",
                           f"the request body did not arrive within {self.body_timeout:g} s"
                           ) from None

    async def _collect(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Refused(400, "client_disconnected", "the client went away")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _Refused(413, "body_too_large", self._too_large())
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _too_large(self) -> str:
        return f"the request body is larger than {self.max_body_bytes} bytes"

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


async def _answer(send: Send, refused: _Refused, retry_after: int | None = None) -> None:
    content = json.dumps({"error": {"code": refused.code, "message": refused.message,
                                    "details": None}}).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(content)).encode()),
               (b"connection", b"close")]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": refused.status,
                "headers": headers})
    await send({"type": "http.response.body", "body": content})
