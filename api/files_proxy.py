"""cairn-api's side of the file service (`cairn-files`, docs/architecture.md, "File-level
restore"): a file route authorises the request in its slot, then answers with a
`FileAnswer`, which gives the slot back and relays the file service's answer, streamed.

Why a download holds no slot: a slot is a thread's and a database connection's worth of the
process (api/gate.py), and a 10 GiB file at a tenant's 20 MB/s takes minutes. Relaying it is
asynchronous: it costs a buffer of a chunk and a connection to cairn-files, nothing a list
page needs. What bounds those instead is `api_file_requests_per_project` (429 beyond), per
process, so one project's downloads never take every connection to the file service.

Nothing is buffered beyond a read: each piece the file service sends is handed to the client
before the next is read (`files_upstream.py`: the bytes as they came, never decompressed, as
the file service is asked for none). A client that goes away ends the relay and closes the
upstream connection, so the file service stops reading the restore point."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from api.errors import AnswerCut, render_error
from api.files_upstream import Endpoint, Upstream, UpstreamBroken
from api.gate import RELEASE_SLOT
from services.errors import CairnError, FileServiceUnavailable, TooManyRequests
from services.settings import Settings

log = logging.getLogger(__name__)

REQUEST_HEADERS = ("range", "if-range")
"""What of the client's request reaches the file service, besides what the API says itself
(the token, the project)."""

ANSWER_HEADERS = frozenset({"content-type", "content-length", "content-range",
                            "content-disposition", "etag", "accept-ranges", "retry-after",
                            "last-modified"})
"""What of the file service's answer reaches the client. Not its framing (Transfer-Encoding,
Connection: the API's server frames its own answer), nor anything else it might say."""

CONNECT_SECONDS = 3.0
"""cairn-files runs beside the API (loopback, or the pod's Service): a connection it does not
take within this is a service down, and the client learns it (503) rather than waits."""

READ_SECONDS = 60.0
"""The longest the file service may be silent, at the least: a parser call takes 10 s at
most, a session's start a few s. Its longer work (a search, the walks of an archive's
paths, a versions request) answers by its own deadline, which the relay waits past by
READ_MARGIN_SECONDS (`FileService.read_seconds`): a versions request that meets its
deadline gives its partial answer, not the relay's 503."""

READ_MARGIN_SECONDS = 15.0

RETRY_AFTER_SECONDS = 1
"""A project at its bound of file requests: one of them ends soon (a listing), or not (a
download); the client tries again shortly either way."""

CONNECTIONS = 256
"""Connections one API process holds to the file service at most (one per request relayed);
a request that finds none free within CONNECT_SECONDS is a 503 like an unreachable service."""


class FileService:
    """One process's client of the file service: its connections and the per-project
    bound of requests relayed at once."""

    def __init__(self, url: str | None, token: str | None, *, per_project: int,
                 longest_work_seconds: float = 0.0) -> None:
        self.url = url.rstrip("/") if url else None
        self.endpoint = Endpoint(self.url) if self.url else None
        self.token = token
        self.per_project = per_project
        self.longest_work_seconds = longest_work_seconds
        self._connections: asyncio.Semaphore | None = None
        self._open: dict[str, int] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> FileService:
        # Without the token cairn-files would refuse every request: the file routes answer
        # 503 (not configured) rather than pass its 401 on as if the tenant's token were
        # wrong.
        token = settings.files_token
        return cls(settings.files_url if token else None,
                   token.get_secret_value() if token else None,
                   per_project=settings.api_file_requests_per_project,
                   longest_work_seconds=max(settings.files_versions_seconds,
                                            settings.files_archive_walk_seconds,
                                            settings.files_search_seconds))

    @property
    def read_seconds(self) -> float:
        """How long the file service may be silent before the relay gives up on it."""
        return max(READ_SECONDS, self.longest_work_seconds + READ_MARGIN_SECONDS)

    def connections(self) -> asyncio.Semaphore:
        """Made on first use, inside the server's event loop."""
        if self._connections is None:
            self._connections = asyncio.Semaphore(CONNECTIONS)
        return self._connections

    def answer(self, project: str, path: str, params: Sequence[tuple[str, str]],
               headers: Any) -> FileAnswer:
        """The answer to a file request the route authorised: the file service's answer to
        `GET path?params`, for `project` (the caller's: the bound, and X-Cairn-Project).
        `headers` are the client's request headers (Range, If-Range are passed on)."""
        passed = {name: headers[name] for name in REQUEST_HEADERS if name in headers}
        return FileAnswer(self, project, path, list(params), passed)

    def take(self, project: str) -> bool:
        held = self._open.get(project, 0)
        if held >= self.per_project:
            return False
        self._open[project] = held + 1
        return True

    def give_back(self, project: str) -> None:
        left = self._open[project] - 1
        if left:
            self._open[project] = left
        else:
            del self._open[project]  # the table holds only projects with requests open

    def open_requests(self, project: str) -> int:
        return self._open.get(project, 0)


class FileAnswer(Response):
    """The file service's answer, relayed. Decides nothing until it is sent: then it gives
    its request's slot back, takes one of its project's file requests (or answers 429),
    asks the file service (or answers 503) and streams what it answers, status and body as
    they are (its errors are the house envelope already; an error that is not JSON is its
    server's, not its own, and is answered as the service unavailable, 503)."""

    def __init__(self, service: FileService, project: str, path: str,
                 params: list[tuple[str, str]], headers: dict[str, str]) -> None:
        super().__init__()
        self.service, self.project, self.path = service, project, path
        self.params, self.passed = params, headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        release = scope.get("state", {}).get(RELEASE_SLOT)
        if release is not None:
            await release()
        if not self.service.take(self.project):
            await self._refuse(TooManyRequests(
                f"{self.service.per_project} file requests of project {self.project} are "
                "being answered already; try again when one has ended",
                retry_after=RETRY_AFTER_SECONDS), scope, receive, send)
            return
        try:
            await self._relay_until_disconnected(scope, receive, send)
        finally:
            self.service.give_back(self.project)

    async def _relay_until_disconnected(self, scope: Scope, receive: Receive,
                                        send: Send) -> None:
        relay = asyncio.ensure_future(self._relay(scope, receive, send))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({relay, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not relay.done():
                log.info("file request of project %s to %s: the client went away",
                         self.project, self.path)
        finally:
            for task in (relay, gone):
                task.cancel()
            for task in (relay, gone):
                with contextlib.suppress(asyncio.CancelledError):
                    await task  # the relay's errors come out here

    async def _relay(self, scope: Scope, receive: Receive, send: Send) -> None:
        service = self.service
        if service.endpoint is None:
            await self._refuse(FileServiceUnavailable(
                "this Cairn runs no file service (CAIRN_FILES_URL): files of restore "
                "points cannot be read"), scope, receive, send)
            return
        headers = {**self.passed, "accept-encoding": "identity",
                   "x-cairn-project": self.project}
        if service.token is not None:
            headers["authorization"] = f"Bearer {service.token}"
        connections = service.connections()
        try:
            await asyncio.wait_for(connections.acquire(), CONNECT_SECONDS)
        except TimeoutError:
            await self._unavailable("every connection to it is taken", scope, receive, send)
            return
        try:
            try:
                upstream = await Upstream.open(
                    service.endpoint, self.path, self.params, headers,
                    connect_seconds=CONNECT_SECONDS, read_seconds=service.read_seconds)
            except (OSError, TimeoutError, UpstreamBroken) as exc:
                await self._unavailable(f"{type(exc).__name__}: {exc}", scope, receive, send)
                return
            try:
                if upstream.status >= 400 and not _json(upstream.headers):
                    # Not cairn-files' own error (those are the house envelope) but its
                    # server's: uvicorn over its connection limit answers a plain-text 503
                    # with no Retry-After; the client gets the envelope and when to retry.
                    await self._unavailable(f"HTTP {upstream.status} that is not JSON",
                                            scope, receive, send)
                    return
                await send({"type": "http.response.start", "status": upstream.status,
                            "headers": [(name, value) for name, value in upstream.headers
                                        if name.decode("latin-1") in ANSWER_HEADERS]})
                try:
                    async for piece in upstream.body():
                        await send({"type": "http.response.body", "body": piece,
                                    "more_body": True})
                except (OSError, TimeoutError, UpstreamBroken) as exc:
                    raise AnswerCut(f"the file service's answer broke off: "
                                    f"{type(exc).__name__}: {exc}") from None
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                upstream.close()
        finally:
            connections.release()

    async def _unavailable(self, why: str, scope: Scope, receive: Receive,
                           send: Send) -> None:
        log.warning("file service at %s: %s", self.service.url, why)
        await self._refuse(FileServiceUnavailable(
            "the file service is unreachable or not answering; try again shortly"),
            scope, receive, send)

    @staticmethod
    async def _refuse(exc: CairnError, scope: Scope, receive: Receive, send: Send) -> None:
        await render_error(exc)(scope, receive, send)


def _json(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the answer says its body is JSON."""
    return any(name == b"content-type"
               and value.split(b";", 1)[0].strip().lower() == b"application/json"
               for name, value in headers)


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone away (the only message a GET's receive has left)."""
    while (await receive())["type"] != "http.disconnect":
        pass
