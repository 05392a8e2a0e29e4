"""Every error leaves the API as {"error": {"code", "message", "details"}}."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.errors import CairnError

log = logging.getLogger(__name__)


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
            503: "A Ceph cluster, Keystone or Cinder is unreachable"}
    return {s: {"model": ErrorResponse, "description": text.get(s, "Error")} for s in statuses}


def _render(status: int, code: str, message: str, details: Any = None) -> JSONResponse:
    body = ErrorResponse(error=ErrorBody(code=code, message=message, details=details or None))
    return JSONResponse(status_code=status, content=body.model_dump(mode="json"))


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in {"body", "query", "path", "header"}:
        where, rest = parts[0], parts[1:]
        return ".".join(rest) if rest and where == "body" else f"{where} {'.'.join(rest)}"
    return ".".join(parts)


def install(app: FastAPI) -> None:
    @app.exception_handler(CairnError)
    async def cairn_error(_request: Request, exc: CairnError) -> JSONResponse:
        if exc.status_code >= 500:
            log.error("%s: %s", exc.code, exc.message)
        return _render(exc.status_code, exc.code, exc.message, exc.details)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{**e, "msg": str(e["msg"]).removeprefix("Value error, ")}
                  for e in exc.errors()]
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
        codes = {404: "not_found", 405: "method_not_allowed"}
        return _render(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return _render(500, "internal_error", "internal error; the operator's logs have details")
