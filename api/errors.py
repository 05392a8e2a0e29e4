"""Every error leaves the API as {"error": {"code", "message", "details"}}."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from kombu.exceptions import OperationalError as BrokerError
from pydantic import BaseModel
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import DataError, DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.errors import CairnError, TooManyRequests
from services.formats import IMAGE_SPEC, PRINTABLE, UUID, VOLUME_REF

RETRY_AFTER_SECONDS = 5
"""What a 503 asks the client to wait: the outages behind one (a database failover, a Redis
restart, Keystone behind a load balancer) take seconds."""

log = logging.getLogger(__name__)


class AnswerCut(Exception):
    """An answer was cut short after it began (its status is sent, so no error can be
    answered any more): raised through the application to the door (api/gate.py), which
    logs it in a line; the server closes the connection, and the client sees its answer
    end before its Content-Length."""


class ClientNotReading(AnswerCut):
    """The door (api/gate.py) could not hand on part of an answer in time: the client
    stopped reading."""


class ErrorBody(BaseModel):
    code: str
    message: str
    details: Any | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


VOLUME_FILTER = "Only this volume: its Cinder id, or cluster/pool/image"
"""The `volume` filter of the list endpoints, as the OpenAPI document describes it."""


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of an endpoint: the errors it can answer, for the OpenAPI document.
    Every authenticated endpoint is also checked against the policy, so 401 brings 403."""
    if 401 in statuses and 403 not in statuses:
        statuses = (*statuses, 403)
    text = {400: "Bad request", 401: "Missing or invalid credentials", 404: "Not found",
            403: "The caller's role may not do this", 409: "Conflict with the current state",
            413: "Over the project's quota", 422: "Invalid input",
            429: "Too many attempts from this client; Retry-After says when to try again",
            431: "The request's line and headers are larger than the API takes",
            503: "A Ceph cluster, Keystone or Cinder is unreachable"}
    return {s: {"model": ErrorResponse, "description": text.get(s, "Error")} for s in statuses}


def _render(status: int, code: str, message: str, details: Any = None,
            retry_after: int | None = None) -> JSONResponse:
    body = ErrorResponse(error=ErrorBody(code=code, message=message, details=details or None))
    if retry_after is None and status == 503:
        retry_after = RETRY_AFTER_SECONDS
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse(status_code=status, content=body.model_dump(mode="json"),
                        headers=headers)


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in {"body", "query", "path", "header"}:
        where, rest = parts[0], parts[1:]
        return ".".join(rest) if rest and where == "body" else f"{where} {'.'.join(rest)}"
    return ".".join(parts)


def render_error(exc: CairnError) -> JSONResponse:
    """A CairnError as every route answers it: for code that answers outside a route's
    error handling (a streaming answer deciding before its first byte)."""
    if exc.status_code >= 500:
        log.error("%s: %s", exc.code, exc.message)
    retry_after = exc.retry_after if isinstance(exc, TooManyRequests) else None
    return _render(exc.status_code, exc.code, exc.message, exc.details, retry_after)


def install(app: FastAPI) -> None:
    @app.exception_handler(CairnError)
    async def cairn_error(_request: Request, exc: CairnError) -> JSONResponse:
        return render_error(exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{**e, "msg": _message(e)} for e in exc.errors()]
        problems = []
        for err in errors:
            if err.get("type") == "json_invalid":
                problems.append("the request body is not valid JSON")
            elif _field(tuple(err["loc"])) in ("", "body"):
                problems.append(f"request body: {err['msg']}")
            else:
                problems.append(f"{_field(tuple(err['loc']))}: {err['msg']}")
        details = [{"field": _field(tuple(e["loc"])), "message": e["msg"], "type": e["type"]}
                   for e in errors]
        return _render(422, "invalid_request", "; ".join(problems), details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # FastAPI's own 400: a body it could not decode (not UTF-8, not the declared
            # content type). Like a body that is not valid JSON, that is invalid input.
            return _render(422, "invalid_request", "the request body could not be read: "
                           "send JSON (Content-Type: application/json) in UTF-8")
        codes = {404: "not_found", 405: "method_not_allowed"}
        return _render(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail))

    @app.exception_handler(DBAPIError)
    async def database_error(_request: Request, exc: DBAPIError) -> JSONResponse:
        if isinstance(exc, DataError):
            # The schemas bound every value; this is the database's last word on one that
            # slipped through (a NUL byte on PostgreSQL, a number over a column's range).
            log.warning("database refused a value: %s", exc.orig)
            return _render(422, "invalid_input", "a value in the request is not accepted "
                           "(out of range or holding characters that cannot be stored)")
        if exc.connection_invalidated or _is_unreachable(exc):
            log.error("database unreachable: %s", exc.orig)
            return _render(503, "database_unavailable", "the service's database is "
                           "unreachable; retry in a few seconds")
        log.exception("database error")
        return _render(500, "internal_error", "internal error; the operator's logs have details")

    @app.exception_handler(PoolTimeout)
    async def pool_timeout(_request: Request, exc: PoolTimeout) -> JSONResponse:
        log.error("no database connection free: %s", exc)
        return _render(503, "database_unavailable", "the service's database is busy or "
                       "unreachable; retry in a few seconds")

    @app.exception_handler(RedisConnectionError)
    @app.exception_handler(RedisTimeoutError)
    @app.exception_handler(BrokerError)
    async def queue_unavailable(_request: Request, exc: Exception) -> JSONResponse:
        log.error("job queue unreachable: %s", exc)
        return _render(503, "queue_unavailable", "the service's job queue is unreachable; "
                       "retry in a few seconds")

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, AnswerCut):  # the door logs those, in a line
            log.exception("unhandled error")
        return _render(500, "internal_error", "internal error; the operator's logs have details")


def _is_unreachable(exc: DBAPIError) -> bool:
    """Whether the database could not be reached (as opposed to refusing a statement): the
    drivers say so with OperationalError (psycopg, sqlite's "unable to open")."""
    return type(exc.orig).__name__ == "OperationalError"


def _message(error: dict[str, Any]) -> str:
    """pydantic's message, in words a caller can act on where the raw one shows a regex."""
    if error.get("type") == "string_pattern_mismatch":
        pattern = (error.get("ctx") or {}).get("pattern")
        if pattern == UUID:
            return "not a valid id: ids are UUIDs such as 3f0c6a2e-9b1d-4c55-8e8a-0d6f1e2b7c41"
        if pattern in (PRINTABLE, VOLUME_REF):
            return ("must not contain control characters (newlines, tabs, NUL, escapes), "
                    "line separators, bidirectional overrides (U+202A-E, U+2066-9) or "
                    "invisible characters (U+200B, U+2060-F, U+FEFF, U+FFF9-B, the tag "
                    "characters U+E0000-7F)")
        if pattern == IMAGE_SPEC:
            return ("not an RBD image name: image, pool/image or cluster/pool/image, with "
                    "letters, digits, '.', '_' and '-'")
    return str(error["msg"]).removeprefix("Value error, ")
