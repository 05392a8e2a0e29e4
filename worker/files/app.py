"""The file service's HTTP app (cairn-files): internal routes only cairn-api calls, with
the bearer token they share (`CAIRN_FILES_TOKEN`) and the project the API authorised in
`X-Cairn-Project`. The API checks that project may read the restore point; here it counts
the project's requests (`files_per_project`). Query parameters are the public routes'.

    GET /internal/v1/restore-points/{id}/partitions       {"restore_point_id", "partitions"}
    GET /internal/v1/restore-points/{id}/files            ?path=/&partition=&limit=100&marker=
    GET /internal/v1/restore-points/{id}/files/stat       ?path=&partition=
    GET /internal/v1/restore-points/{id}/files/content    ?path=&partition=   (Range, If-Range)
    GET /internal/v1/restore-points/{id}/files/archive    ?path=..&path=..&partition=&format=tar|zip
    GET /internal/v1/restore-points/{id}/files/search     ?pattern=&path=/&partition=&limit=100
    GET /internal/v1/file-versions                         ?path=&partition=&restore_point=ID (1-60)
    GET /healthz                                           (no token)

Errors leave as Cairn's envelope, {"error": {"code", "message", "details"}} with the
error's status (api/errors.py renders the API's the same way; the worker may not import
the API), so the API passes status, headers and body on as they are."""

from __future__ import annotations

import hmac
import logging
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

import anyio
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.errors import (
    BadRequest,
    CairnError,
    InvalidInput,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
)
from services.files import bounds
from services.formats import PROJECT, UUID
from worker.files.downloads import Body, Download
from worker.files.headers import RangeNotSatisfiable
from worker.files.service import FileService

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
"""What a 503 asks a client to wait: an open restore point is held for as long as a
request reads it, seconds for most."""
MAX_PATH_BYTES = bounds.MAX_PATH_BYTES
MAX_PATTERN = bounds.MAX_PATTERN_CHARS
MAX_VERSIONS = bounds.MAX_VERSIONS

DISCONNECT_POLL_SECONDS = 0.5
"""How often a long request (versions, an archive's walks, a search) looks whether its
client is still there; gone, the service stops between its steps."""

T = TypeVar("T")

_UUID = re.compile(UUID)
_PROJECT = re.compile(PROJECT)

Partition = Annotated[int | None, Query(ge=0, le=bounds.MAX_PARTITION)]
Limit = Annotated[int, Query(ge=1, le=bounds.MAX_PAGE)]


def error_response(status: int, code: str, message: str, details: Any = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """Cairn's error envelope."""
    headers = dict(headers or {})
    if status == 503:
        headers.setdefault("Retry-After", str(RETRY_AFTER_SECONDS))
    return JSONResponse(status_code=status, headers=headers or None, content={
        "error": {"code": code, "message": message, "details": details or None}})


def _checked_path(value: str, what: str = "path", *, absolute: bool = True) -> str:
    if "\0" in value:
        raise InvalidInput(f"{what} must not hold a NUL character")
    if len(value.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise InvalidInput(f"{what} is longer than {MAX_PATH_BYTES} bytes")
    if absolute and not value.startswith("/"):
        raise InvalidInput(f"{what} must be absolute (start with /): {value[:100]!r}")
    return value


def _checked_id(value: str) -> str:
    if not _UUID.match(value):
        raise InvalidInput(f"not a restore point id: {value[:40]!r}")
    return value.lower()


def _project(request: Request) -> str:
    project = request.headers.get("x-cairn-project")
    if project is None:
        raise BadRequest("X-Cairn-Project is required: the project cairn-api authorised")
    if not _PROJECT.match(project):
        raise BadRequest("X-Cairn-Project is not a project id")
    return project


Project = Annotated[str, Depends(_project)]
"""The project the API authorised, whose requests the service counts."""


def create_app(service: FileService, token: str) -> FastAPI:
    """The app over `service`, answering only requests that present `token`."""
    expected = token.encode()

    def authorized(request: Request) -> None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(),
                                                                 expected):
            raise Unauthorized("the file service answers cairn-api only: present its "
                               "token as Authorization: Bearer")

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        service.start()
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(service.close)

    app = FastAPI(title="cairn-files", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=lifespan)
    _install_errors(app)
    # The file calls' own threads, sized with the table of open restore points: a request
    # and a download's next piece for each, and a few for requests refused at once. Not
    # anyio's default pool, which the health check and the event loop's own work share.
    limiter = anyio.CapacityLimiter(2 * service.limits.sessions + 4)

    async def run(request: Request, call: Callable[[threading.Event], T]) -> T:
        """`call(cancelled)` on one of the limiter's threads; `cancelled` is set when the
        client goes away meanwhile (the service checks it between its steps)."""
        cancelled = threading.Event()

        async def watch() -> None:
            while not cancelled.is_set():
                if await request.is_disconnected():
                    cancelled.set()
                    return
                await anyio.sleep(DISCONNECT_POLL_SECONDS)

        done: list[T] = []
        failed: Exception | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            try:
                done.append(await anyio.to_thread.run_sync(call, cancelled, limiter=limiter))
            except Exception as error:  # raised as it is, not in the group's ExceptionGroup
                failed = error
            finally:
                group.cancel_scope.cancel()
        if failed is not None:
            raise failed
        return done[0]

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        # On the event loop: answered while every file thread is busy.
        return {"status": "ok", "open_restore_points": len(service.table.open_ids())}

    internal = APIRouter(prefix="/internal/v1", dependencies=[Depends(authorized)])

    @internal.get("/restore-points/{restore_point_id}/partitions")
    async def partitions(request: Request, restore_point_id: str,
                         project: Project) -> dict[str, Any]:
        rp = _checked_id(restore_point_id)
        return await run(request, lambda _: service.partitions(project, rp))

    @internal.get("/restore-points/{restore_point_id}/files")
    async def listing(request: Request, restore_point_id: str, project: Project,
                      path: str = "/", partition: Partition = None, limit: Limit = 100,
                      marker: str | None = None) -> dict[str, Any]:
        if marker is not None:
            _checked_path(marker, "marker", absolute=False)
        call = partial(service.listing, project, _checked_id(restore_point_id), partition,
                       _checked_path(path), marker, limit)
        return await run(request, lambda _: call())

    @internal.get("/restore-points/{restore_point_id}/files/stat")
    async def stat(request: Request, restore_point_id: str, project: Project, path: str,
                   partition: Partition = None) -> dict[str, Any]:
        call = partial(service.stat, project, _checked_id(restore_point_id), partition,
                       _checked_path(path))
        return await run(request, lambda _: call())

    @internal.get("/restore-points/{restore_point_id}/files/content")
    async def content(request: Request, restore_point_id: str, project: Project, path: str,
                      partition: Partition = None) -> StreamingResponse:
        call = partial(service.download, project, _checked_id(restore_point_id), partition,
                       _checked_path(path), range_header=request.headers.get("range"),
                       if_range=request.headers.get("if-range"))
        return _streamed(await run(request, lambda _: call()), limiter)

    @internal.get("/restore-points/{restore_point_id}/files/archive")
    async def archive(request: Request, restore_point_id: str, project: Project,
                path: Annotated[list[str], Query(min_length=1,
                                                 max_length=bounds.MAX_ARCHIVE_PATHS)],
                partition: Partition = None,
                fmt: Annotated[Literal["tar", "zip"], Query(alias="format")] = "tar",
                ) -> StreamingResponse:
        paths = [_checked_path(p) for p in path]
        call = partial(service.archive, project, _checked_id(restore_point_id), partition,
                       paths, fmt)
        return _streamed(await run(request, lambda cancelled: call(cancelled=cancelled)),
                         limiter)

    @internal.get("/restore-points/{restore_point_id}/files/search")
    async def search(request: Request, restore_point_id: str, project: Project,
               pattern: Annotated[str, Query(min_length=1, max_length=MAX_PATTERN)],
               path: str = "/", partition: Partition = None,
               limit: Limit = 100) -> dict[str, Any]:
        if "\0" in pattern:
            raise InvalidInput("pattern must not hold a NUL character")
        call = partial(service.search, project, _checked_id(restore_point_id), partition,
                       _checked_path(path), pattern, limit)
        return await run(request, lambda _: call())

    @internal.get("/file-versions")
    async def versions(request: Request, project: Project, path: str,
                 restore_point: Annotated[list[str], Query(min_length=1,
                                                           max_length=MAX_VERSIONS)],
                 partition: Partition = None) -> dict[str, Any]:
        ids = [_checked_id(rp) for rp in restore_point]
        call = partial(service.versions, project, ids, partition, _checked_path(path))
        return await run(request, lambda cancelled: call(cancelled=cancelled))

    app.include_router(internal)
    return app


def _streamed(download: Download, limiter: anyio.CapacityLimiter) -> StreamingResponse:
    """The download's body sent as the producer makes it: each piece taken on one of the
    file calls' threads, and the body closed (its producer stopped, its restore point
    released) when the last piece is sent, the sending fails or the client goes away."""
    return StreamingResponse(_pieces(download.body, limiter), status_code=download.status,
                             headers=download.headers, media_type=download.media_type)


def _next(pieces: Iterator[bytes]) -> bytes | None:
    return next(pieces, None)


async def _pieces(body: Body, limiter: anyio.CapacityLimiter) -> AsyncIterator[bytes]:
    try:
        while (piece := await anyio.to_thread.run_sync(_next, body,
                                                       limiter=limiter)) is not None:
            yield piece
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(body.close, limiter=limiter)


def _install_errors(app: FastAPI) -> None:
    @app.exception_handler(CairnError)
    async def cairn_error(_request: Request, exc: CairnError) -> JSONResponse:
        if exc.status_code >= 500:
            log.error("%s: %s", exc.code, exc.message)
        headers = {}
        if isinstance(exc, TooManyRequests):
            headers["Retry-After"] = str(exc.retry_after)
        elif isinstance(exc, Unauthorized):
            headers["WWW-Authenticate"] = "Bearer"
        elif isinstance(exc, ServiceUnavailable):
            headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return error_response(exc.status_code, exc.code, exc.message, exc.details, headers)

    @app.exception_handler(RangeNotSatisfiable)
    async def unsatisfiable(_request: Request, exc: RangeNotSatisfiable) -> JSONResponse:
        return error_response(416, "range_not_satisfiable", str(exc),
                              headers={"Content-Range": exc.content_range})

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        details = [{"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"],
                    "type": e["type"]} for e in exc.errors()]
        message = "; ".join(f"{d['field']}: {d['message']}" for d in details)
        return error_response(422, "invalid_request", message, details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        return error_response(exc.status_code, codes.get(exc.status_code, "http_error"),
                              str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return error_response(500, "internal_error",
                              "internal error; the operator's logs have details")
