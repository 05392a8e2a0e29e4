"""The file routes on the real app (its door, policy and errors; SQLite for the rows), with a
stand-in for the file service in the test's own event loop (`Upstream`: a real HTTP/1.1
server answering each request with what the test says, on a Unix socket, as the unit tier
allows no TCP; in uvloop's event loop, as uvicorn runs the API): what a query may hold
(422 before any row is read or the file service asked), whose restore points are readable
(404 as missing), and the relay itself: what passes each way, errors as the file service
says them, 503 when it is down, and a download that streams as it comes, outside the
request slots, within its project's bound."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlencode

import httpx
import pytest
import uvloop
from fastapi import FastAPI

from api import files_proxy
from api.files_proxy import FileService
from api.files_upstream import HEAD_BYTES, Endpoint
from api.files_upstream import Upstream as Answering
from api.main import create_app
from services.base import Base
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.settings import Settings
from services.status import RestorePointStatus

FILES_URL = "http://cairn-files.test"
T = TypeVar("T")
TOKEN = "files-token-of-the-deployment"


class Body(httpx.AsyncByteStream):
    """An upstream body whose chunks come when the test says: a chunk, then each next one
    once `more` is set."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.more = asyncio.Event()
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for n, chunk in enumerate(self.chunks):
            if n:
                await self.more.wait()
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class Upstream:
    """The file service: records each request (as an httpx.Request), answers with
    `answer(request)`, framed by Content-Length when the answer has one, else chunked.
    `answer` raising httpx.ConnectError: the connection is closed with no answer."""

    answer: Callable[[httpx.Request], httpx.Response]
    requests: list[httpx.Request] = field(default_factory=list)
    handling: set[asyncio.Task[None]] = field(default_factory=set)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handling.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line, *fields = head.decode("latin-1").split("\r\n")[:-2]
            method, target, _version = line.split(" ")
            headers = [tuple(f.split(": ", 1)) for f in fields]
            request = httpx.Request(method, FILES_URL + target, headers=headers)
            self.requests.append(request)
            try:
                response = self.answer(request)
            except httpx.ConnectError:
                return
            chunked = "content-length" not in response.headers
            out = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}",
                   *(f"{k}: {v}" for k, v in response.headers.multi_items()),
                   *(["Transfer-Encoding: chunked"] if chunked else []), "", ""]
            writer.write("\r\n".join(out).encode("latin-1"))
            stream = response.stream
            assert isinstance(stream, httpx.AsyncByteStream)

            async def send_body() -> None:
                async for chunk in stream:
                    writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
                                 if chunked else chunk)
                    await writer.drain()
                if chunked:
                    writer.write(b"0\r\n\r\n")
                await writer.drain()

            # The relay closing its connection ends the answer, as a real server's would.
            sending = asyncio.ensure_future(send_body())
            closed = asyncio.ensure_future(reader.read())
            await asyncio.wait({sending, closed}, return_when=asyncio.FIRST_COMPLETED)
            for task in (sending, closed):
                task.cancel()
            await stream.aclose()
        finally:
            writer.close()


@dataclass
class Trickle:
    """A file service that answers `start`, then `piece` every `pause` seconds, `pieces`
    times at most, until the relay closes the connection; `sent` counts what it wrote."""

    start: bytes
    piece: bytes
    pieces: int
    pause: float
    sent: int = 0
    handling: set[asyncio.Task[None]] = field(default_factory=set)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handling.add(task)
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(self.start)
            for _ in range(self.pieces):
                if writer.is_closing() or reader.at_eof():
                    break
                writer.write(self.piece)
                await writer.drain()
                self.sent += len(self.piece)
                await asyncio.sleep(self.pause)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def _answer(status: int, content: bytes, headers: dict[str, str]) -> httpx.Response:
    """As a real transport gives it: a stream not read yet."""
    return httpx.Response(status, headers={"Content-Length": str(len(content)), **headers},
                          stream=Body([content]))


def _json(status: int, body: Any, **headers: str) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: _answer(status, json.dumps(body).encode(),
                                   {"Content-Type": "application/json", **headers})


@dataclass
class Answer:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    first_chunk: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Stack:
    app: FastAPI
    rp: str
    """An available restore point of project p."""
    busy: str
    """A restore point of project p being created."""
    volume: str

    served: Upstream | Trickle | None = None
    per_project: int = 4
    url: str | None = FILES_URL

    def upstream(self, answer: Callable[[httpx.Request], httpx.Response],
                 per_project: int = 4, url: str | None = FILES_URL) -> Upstream:
        """The file service the next requests reach (`serving` starts it)."""
        self.served, self.per_project, self.url = Upstream(answer), per_project, url
        return self.served

    def trickle(self, trickle: Trickle) -> Trickle:
        """A file service that answers what `trickle` says, whatever it is asked."""
        self.served, self.per_project, self.url = trickle, 4, FILES_URL
        return trickle

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """The file service `upstream` set, listening on loopback in this event loop, and
        the app's FileService pointed at it (or at nothing, url None)."""
        assert self.served is not None, "call stack.upstream(...) first"
        with tempfile.TemporaryDirectory() as directory:
            path = f"{directory}/files.sock"
            server = await asyncio.start_unix_server(self.served.serve, path)
            files = FileService(self.url, TOKEN, per_project=self.per_project)
            if files.endpoint is not None:
                files.endpoint = UnixEndpoint(path)
            self.app.state.files = files
            try:
                yield
                # Each answer ends (its stream closed) once its connection is.
                await asyncio.wait_for(asyncio.gather(*self.served.handling), 5)
            finally:
                self.served.handling.clear()  # this event loop's: it ends here
                server.close()


class UnixEndpoint(Endpoint):
    """FILES_URL, reached on a Unix socket; `reads` holds the size of each read the relay's
    connections received, in order."""

    def __init__(self, path: str) -> None:
        super().__init__(FILES_URL)
        self.path = path
        self.reads: list[int] = []

    async def connect(self, protocol: Callable[[], Answering], timeout: float
                      ) -> tuple[asyncio.BaseTransport, Answering]:
        def counted() -> Answering:
            answering = protocol()
            received = answering.data_received

            def data_received(data: bytes) -> None:
                self.reads.append(len(data))
                received(data)

            answering.data_received = data_received  # type: ignore[method-assign]
            return answering

        return await asyncio.get_running_loop().create_unix_connection(counted, self.path)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One app for the module: FastAPI builds a route's dependencies when a request first
    matches it, ~0.7 s for an app's routes, paid once here. Each test sets its own file
    service (`Stack.upstream`)."""
    tmp_path = tmp_path_factory.mktemp("files-api")
    app = create_app(Settings(
        auth_strategy="noauth", environment="development", portal_dir=None,
        database_url=f"sqlite:///{tmp_path / 'cairn.db'}", api_threads=1,
        api_client_threads=1))
    Base.metadata.create_all(app.state.db.engine)
    with app.state.db.session() as session:
        volume = Volume(project_id="p", cluster="ceph-a", pool="volumes", image="vm-disk")
        session.add(volume)
        session.flush()
        rps = [RestorePoint(project_id="p", volume_id=volume.id, target="local", status=status,
                            created_at=datetime(2026, 11, 27, n, tzinfo=UTC))
               for n, status in enumerate([RestorePointStatus.AVAILABLE,
                                           RestorePointStatus.CREATING])]
        session.add_all(rps)
        session.flush()
        ids = [rp.id for rp in rps]
        volume_id = volume.id
    yield Stack(app, ids[0], ids[1], volume_id)
    app.state.db.dispose()


async def _request(app: FastAPI, path: str, params: list[tuple[str, str]] | None = None,
                   project: str = "p", headers: dict[str, str] | None = None,
                   answer: Answer | None = None,
                   disconnect: asyncio.Event | None = None) -> Answer:
    """One GET through the whole app, as uvicorn would call it. The client goes away when
    `disconnect` is set."""
    answer = answer or Answer()
    sent = [(b"x-project-id", project.encode())]
    sent += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": urlencode(params or []).encode(), "root_path": "",
             "headers": sent, "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8787)}
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await (disconnect or asyncio.Event()).wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message.get("body"):
            answer.chunks.append(message["body"])
            answer.first_chunk.set()

    await app(scope, receive, send)
    return answer


async def _served(stack: Stack, scenario: Awaitable[T]) -> T:
    async with stack.serving():
        return await scenario


def _get(stack: Stack, path: str, params: list[tuple[str, str]] | None = None,
         **kwargs: Any) -> Answer:
    async def get() -> Answer:
        async with stack.serving():
            return await asyncio.wait_for(_request(stack.app, path, params, **kwargs), 10)
    return uvloop.run(get())


def _routes(stack: Stack, rp: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """Every file route, with a query each accepts."""
    base = f"/v1/restore-points/{rp}"
    return [(f"{base}/partitions", []), (f"{base}/files", [("path", "/etc")]),
            (f"{base}/files/stat", [("path", "/etc/hosts")]),
            (f"{base}/files/content", [("path", "/etc/hosts")]),
            (f"{base}/files/archive", [("path", "/etc"), ("format", "zip")]),
            (f"{base}/files/search", [("pattern", "*.conf")])]


# What a query may hold.

LONG_IN_BYTES = "/" + "é" * 2048
"""2049 characters, 4097 bytes in UTF-8: a path's bound is counted in bytes."""


@pytest.mark.parametrize(("route", "params", "field"), [
    ("files", [("path", "etc")], "query path"),
    ("files", [("path", "/etc\x00/x")], "query path"),
    ("files", [("path", LONG_IN_BYTES)], "query path"),
    ("files", [("path", "/" + "a" * 4096)], "query path"),
    ("files", [("limit", "0")], "query limit"),
    ("files", [("limit", "1001")], "query limit"),
    ("files", [("partition", "-1")], "query partition"),
    ("files", [("marker", "a\x00")], "query marker"),
    ("files/stat", [], "query path"),
    ("files/content", [("path", "/x"), ("partition", "one")], "query partition"),
    ("files/archive", [], "query path"),
    ("files/archive", [("path", "/etc"), ("format", "rar")], "query format"),
    ("files/archive", [("path", "/etc"), ("path", "tmp")], "query path.1"),
    ("files/search", [], "query pattern"),
    ("files/search", [("pattern", "x" * 256)], "query pattern"),
    ("files/search", [("pattern", "*"), ("limit", "1001")], "query limit"),
])
def test_a_query_out_of_bounds_is_refused_before_anything_is_read(
        stack: Stack, route: str, params: list[tuple[str, str]], field: str) -> None:
    upstream = stack.upstream(_json(200, {}))
    answer = _get(stack, f"/v1/restore-points/{stack.rp}/{route}", params)
    assert answer.status == 422, answer.body
    assert answer.json()["error"]["code"] == "invalid_request"
    assert [d["field"] for d in answer.json()["error"]["details"]] == [field]
    assert upstream.requests == []


def test_a_path_at_its_bound_passes(stack: Stack) -> None:
    upstream = stack.upstream(_json(200, {"path": "/", "entries": []}))
    at_bound = "/" + "é" * 2047 + "a"  # 4096 bytes
    assert _get(stack, f"/v1/restore-points/{stack.rp}/files/stat",
                [("path", at_bound)]).status == 200
    assert upstream.requests[0].url.params["path"] == at_bound


def test_versions_are_asked_of_at_most_sixty_restore_points(stack: Stack) -> None:
    upstream = stack.upstream(_json(200, {}))
    answer = _get(stack, f"/v1/volumes/{stack.volume}/file-versions",
                  [("path", "/etc/hosts"), ("limit", "61")])
    assert answer.status == 422
    assert upstream.requests == []


# Whose restore points.

def test_another_projects_restore_point_is_404_on_every_route_as_a_missing_one(
        stack: Stack) -> None:
    upstream = stack.upstream(_json(200, {}))
    missing = "3f0c6a2e-9b1d-4c55-8e8a-0d6f1e2b7c41"
    for (path, params), (missing_path, _) in zip(_routes(stack, stack.rp),
                                                  _routes(stack, missing), strict=True):
        other = _get(stack, path, params, project="q")
        nobody = _get(stack, missing_path, params, project="q")
        assert other.status == nobody.status == 404, path
        assert other.json()["error"]["code"] == "restore_point_not_found"
        assert other.body.replace(stack.rp.encode(), b"ID") == \
            nobody.body.replace(missing.encode(), b"ID")
    versions = _get(stack, f"/v1/volumes/{stack.volume}/file-versions",
                    [("path", "/etc/hosts")], project="q")
    assert versions.status == 404
    assert versions.json()["error"]["code"] == "volume_not_found"
    assert upstream.requests == []


def test_a_restore_point_being_created_is_409_naming_its_status(stack: Stack) -> None:
    upstream = stack.upstream(_json(200, {}))
    for path, params in _routes(stack, stack.busy):
        answer = _get(stack, path, params)
        assert answer.status == 409, path
        assert answer.json()["error"]["code"] == "restore_point_not_readable"
        assert "creating" in answer.json()["error"]["message"]
    assert upstream.requests == []


def test_a_role_the_policy_refuses_is_403(stack: Stack) -> None:
    stack.upstream(_json(200, {}))
    answer = _get(stack, f"/v1/restore-points/{stack.rp}/files/content",
                  [("path", "/etc/hosts")], headers={"X-Roles": "observer"})
    assert answer.status == 403
    assert "file:get" in answer.json()["error"]["message"]


# The relay.

def test_a_range_goes_to_the_file_service_and_its_answer_comes_back_as_it_is(
        stack: Stack) -> None:
    upstream = stack.upstream(lambda request: _answer(206, b"llo", {
        "Content-Type": "application/octet-stream", "Content-Range": "bytes 2-4/11",
        "Content-Disposition": "attachment; filename*=UTF-8''hosts", "ETag": '"e1"',
        "Accept-Ranges": "bytes", "Set-Cookie": "files=1", "X-Internal": "no"}))
    answer = _get(stack, f"/v1/restore-points/{stack.rp}/files/content",
                  [("path", "/etc/hosts"), ("partition", "2")],
                  headers={"Range": "bytes=2-4", "If-Range": '"e1"', "Cookie": "a=b"})
    assert (answer.status, answer.body) == (206, b"llo")
    assert {k: v for k, v in answer.headers.items() if k != "content-length"} == {
        "content-type": "application/octet-stream", "content-range": "bytes 2-4/11",
        "content-disposition": "attachment; filename*=UTF-8''hosts", "etag": '"e1"',
        "accept-ranges": "bytes"}
    assert answer.headers["content-length"] == "3"
    [request] = upstream.requests
    assert str(request.url) == (f"{FILES_URL}/internal/v1/restore-points/{stack.rp}/files/"
                                "content?path=%2Fetc%2Fhosts&partition=2")
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["x-cairn-project"] == "p"
    assert request.headers["range"] == "bytes=2-4"
    assert request.headers["if-range"] == '"e1"'
    assert request.headers["accept-encoding"] == "identity"
    assert "cookie" not in request.headers
    assert "x-project-id" not in request.headers


def test_each_route_asks_the_file_service_for_its_own(stack: Stack) -> None:
    upstream = stack.upstream(_json(200, {}))
    for path, params in _routes(stack, stack.rp):
        assert _get(stack, path, params).status == 200
    base = f"/internal/v1/restore-points/{stack.rp}"
    assert [(r.url.path, str(r.url.params)) for r in upstream.requests] == [
        (f"{base}/partitions", ""),
        (f"{base}/files", "path=%2Fetc&limit=100"),
        (f"{base}/files/stat", "path=%2Fetc%2Fhosts"),
        (f"{base}/files/content", "path=%2Fetc%2Fhosts"),
        (f"{base}/files/archive", "path=%2Fetc&format=zip"),
        (f"{base}/files/search", "pattern=%2A.conf&path=%2F&limit=100"),
    ]


def test_versions_name_the_volumes_available_restore_points_newest_first(
        stack: Stack) -> None:
    with stack.app.state.db.session() as session:
        volume = Volume(project_id="p", cluster="ceph-a", pool="volumes", image="versioned",
                        cinder_volume_id="5a1d0c3e-0000-4000-8000-00000000000a")
        session.add(volume)
        session.flush()
        rps = [RestorePoint(project_id="p", volume_id=volume.id, target="local",
                            status=status, created_at=datetime(2026, 11, 28, n, tzinfo=UTC))
               for n, status in enumerate([RestorePointStatus.AVAILABLE,
                                           RestorePointStatus.ERROR,
                                           RestorePointStatus.AVAILABLE])]
        session.add_all(rps)
        session.flush()
        older, newer = rps[0].id, rps[2].id
    upstream = stack.upstream(_json(200, {"path": "/etc/hosts", "versions": []}))
    answer = _get(stack, "/v1/volumes/5a1d0c3e-0000-4000-8000-00000000000a/file-versions",
                  [("path", "/etc/hosts")])
    assert answer.status == 200
    [request] = upstream.requests
    assert request.url.path == "/internal/v1/file-versions"
    assert request.url.params.get_list("restore_point") == [newer, older]
    assert request.url.params["path"] == "/etc/hosts"


def test_a_volume_with_no_available_restore_point_has_no_versions(stack: Stack) -> None:
    with stack.app.state.db.session() as session:
        empty = Volume(project_id="p", cluster="ceph-a", pool="volumes", image="new")
        session.add(empty)
        session.flush()
        empty_id = empty.id
    upstream = stack.upstream(_json(200, {}))
    answer = _get(stack, f"/v1/volumes/{empty_id}/file-versions", [("path", "/a")])
    assert (answer.status, answer.json()) == (200, {"path": "/a", "versions": []})
    assert upstream.requests == []


def test_the_file_services_errors_reach_the_client_as_it_says_them(stack: Stack) -> None:
    envelope = {"error": {"code": "path_not_found", "message": "/etc/nope: no such file",
                          "details": None}}
    stack.upstream(_json(404, envelope))
    answer = _get(stack, f"/v1/restore-points/{stack.rp}/files/stat",
                  [("path", "/etc/nope")])
    assert (answer.status, answer.json()) == (404, envelope)
    stack.upstream(_json(503, {"error": {"code": "file_service_unavailable", "message": "busy",
                                         "details": None}}, **{"Retry-After": "7"}))
    busy = _get(stack, f"/v1/restore-points/{stack.rp}/files", [])
    assert (busy.status, busy.headers["retry-after"]) == (503, "7")


def test_a_file_service_down_is_503_with_retry_after(stack: Stack) -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    stack.upstream(down)
    answer = _get(stack, f"/v1/restore-points/{stack.rp}/files", [])
    assert answer.status == 503
    assert answer.json()["error"]["code"] == "file_service_unavailable"
    assert answer.headers["retry-after"]
    stack.upstream(_json(200, {}), url=None)
    unconfigured = _get(stack, f"/v1/restore-points/{stack.rp}/files", [])
    assert unconfigured.status == 503
    assert "CAIRN_FILES_URL" in unconfigured.json()["error"]["message"]


@pytest.mark.parametrize(("status", "content_type"), [
    (503, "text/plain; charset=utf-8"),  # uvicorn past its connection limit, as it says it
    (500, "text/plain; charset=utf-8"), (400, "text/html"), (502, None)])
def test_an_error_of_the_file_services_server_is_the_envelope_with_retry_after(
        stack: Stack, status: int, content_type: str | None) -> None:
    stack.upstream(lambda request: _answer(
        status, b"Service Unavailable",
        {"Content-Type": content_type} if content_type else {}))
    answer = _get(stack, f"/v1/restore-points/{stack.rp}/files", [])
    assert answer.status == 503
    assert answer.json()["error"]["code"] == "file_service_unavailable"
    assert answer.headers["retry-after"]


def test_a_range_with_a_control_character_does_not_reach_the_file_service(
        stack: Stack) -> None:
    """Header values are written into the file service's request as they are: one holding
    a control character (a would-be header of its own) is left out."""
    upstream = stack.upstream(lambda request: _answer(200, b"data", {}))
    answer = _get(stack, f"/v1/restore-points/{stack.rp}/files/content",
                  [("path", "/etc/hosts")],
                  headers={"Range": "bytes=0-1\x0bX-Cairn-Project: q", "If-Range": '"e1"'})
    assert answer.status == 200
    [request] = upstream.requests
    assert "range" not in request.headers
    assert request.headers["if-range"] == '"e1"'
    assert request.headers["x-cairn-project"] == "p"


def test_an_answer_with_an_unbounded_head_is_503_not_read_on(stack: Stack) -> None:
    """A file service that answers with more headers than any answer of it has (a broken
    or impersonated one) is refused as unavailable; nothing of it reaches the client."""
    many = {f"X-Filler-{n}": "x" * 100 for n in range(150)}
    stack.upstream(lambda request: _answer(200, b"{}", many))
    answer = _get(stack, f"/v1/restore-points/{stack.rp}/files", [])
    assert answer.status == 503
    assert answer.json()["error"]["code"] == "file_service_unavailable"
    assert not any(name.startswith("x-filler") for name in answer.headers)


def test_a_header_that_never_ends_is_503_read_no_further_than_the_heads_bound(
        stack: Stack) -> None:
    """httptools keeps a header line until it is complete: the relay counts the head's bytes
    as they arrive, and stops reading at its bound."""
    served = stack.trickle(Trickle(b"HTTP/1.1 200 OK\r\nX: ", b"a" * 4096, 256, 0.001))
    answer = _get(stack, f"/v1/restore-points/{stack.rp}/files", [])
    assert answer.status == 503
    assert answer.json()["error"]["code"] == "file_service_unavailable"
    reads = stack.app.state.files.endpoint.reads
    # It read on only until a read took it past the bound (before: all of the 1 MiB sent,
    # each byte kept by httptools, until the file service closed the connection).
    assert sum(reads[:-1]) <= HEAD_BYTES, reads
    assert served.sent < 1 << 20


def test_nothing_is_parsed_once_the_head_is_refused() -> None:
    """A transport may hand on what it had read before it closed: none of it is parsed (it
    would be kept, and could still complete the refused head)."""

    class Closing:
        def close(self) -> None:
            pass

    upstream = Answering(60)
    upstream.connection_made(Closing())  # type: ignore[arg-type]
    upstream.data_received(b"HTTP/1.1 200 " + b"O" * HEAD_BYTES)  # a reason past the bound
    upstream.data_received(b"\r\n\r\n")
    assert upstream.status == 0
    assert not upstream.headers


def test_a_status_line_that_never_ends_is_503_at_the_heads_deadline(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each byte comes well within the read timeout; the head as a whole has one too."""
    monkeypatch.setattr(files_proxy.FileService, "read_seconds", property(lambda _self: 0.3))
    stack.trickle(Trickle(b"HTTP/1.1 200 ", b"O", 300, 0.01))  # 3 s of a reason phrase

    async def timed() -> tuple[Answer, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with stack.serving():
            answer = await asyncio.wait_for(
                _request(stack.app, f"/v1/restore-points/{stack.rp}/files"), 10)
        return answer, loop.time() - started

    answer, took = uvloop.run(timed())
    assert answer.status == 503
    # Before: each byte restarted the 0.3 s wait, the answer came when the service hung up.
    assert took < 1.5, took


def test_the_relay_waits_past_the_file_services_own_longest_deadline(
        stack: Stack) -> None:
    """A versions request, an archive's walks or a search that meets its own deadline
    answers then (partly): the relay must still be listening, not answer 503 first."""
    settings = stack.app.state.settings.model_copy(update={"files_versions_seconds": 300.0})
    assert files_proxy.FileService.from_settings(settings).read_seconds >= 310
    settings = stack.app.state.settings
    longest = max(settings.files_versions_seconds, settings.files_archive_walk_seconds,
                  settings.files_search_seconds)
    assert files_proxy.FileService.from_settings(settings).read_seconds >= longest + 10
    assert files_proxy.FileService(None, None, per_project=1).read_seconds == \
        files_proxy.READ_SECONDS


def test_a_download_streams_outside_the_slots_within_its_projects_bound(
        stack: Stack) -> None:
    """api_threads=1, api_client_threads=1: while p's download streams, p's other requests
    are served, and its second file request is 429 (bound 1) while q's is not."""
    body = Body([b"first chunk", b"second chunk"])
    content = f"/v1/restore-points/{stack.rp}/files/content"

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/content"):
            return httpx.Response(200, stream=body)
        return _json(200, {})(request)

    stack.upstream(answer, per_project=1)

    async def scenario() -> tuple[Answer, Answer, Answer, Answer, bytes]:
        download = Answer()
        task = asyncio.ensure_future(_request(stack.app, content, [("path", "/big")],
                                              answer=download))
        # The first chunk reaches the client while the file service has not sent the rest:
        # nothing waits for the whole file.
        await asyncio.wait_for(download.first_chunk.wait(), 5)
        read = await asyncio.wait_for(
            _request(stack.app, f"/v1/restore-points/{stack.rp}"), 5)
        second = await asyncio.wait_for(_request(stack.app, content, [("path", "/x")]), 5)
        other = await asyncio.wait_for(_request(
            stack.app, "/v1/restore-points/3f0c6a2e-9b1d-4c55-8e8a-0d6f1e2b7c41/files",
            project="q"), 5)
        seen = download.body
        body.more.set()
        await asyncio.wait_for(task, 5)
        return download, read, second, other, seen

    download, read, second, other, seen = uvloop.run(_served(stack, scenario()))
    assert seen == b"first chunk"
    assert (download.status, download.body) == (200, b"first chunksecond chunk")
    assert read.status == 200
    assert second.status == 429
    assert second.json()["error"]["code"] == "too_many_requests"
    assert second.headers["retry-after"] == "1"
    assert other.status == 404  # past the bound of p: q's request was read, and refused
    assert stack.app.state.files.open_requests("p") == 0


def test_a_client_that_goes_away_ends_the_relay_and_frees_its_place(stack: Stack) -> None:
    body = Body([b"first chunk", b"never sent"])
    stack.upstream(lambda request: httpx.Response(200, stream=body), per_project=1)

    async def scenario() -> Answer:
        gone = asyncio.Event()
        download = Answer()
        task = asyncio.ensure_future(_request(
            stack.app, f"/v1/restore-points/{stack.rp}/files/content", [("path", "/big")],
            answer=download, disconnect=gone))
        await asyncio.wait_for(download.first_chunk.wait(), 5)
        gone.set()
        await asyncio.wait_for(task, 5)
        return download

    download = uvloop.run(_served(stack, scenario()))
    assert download.body == b"first chunk"
    assert body.closed
    assert stack.app.state.files.open_requests("p") == 0
