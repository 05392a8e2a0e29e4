"""List pages answered with a model serialized once, built in one trip to the thread pool.

FastAPI would validate a returned model against `response_model` again before serializing
it, which costs as much as building it on a page of a hundred items; `response_model=` stays
on the route for the OpenAPI document. And a list route written as a plain `def` with a
session dependency takes three trips to the thread pool (the session's setup, the route, the
session's cleanup); under load each hand-over waits for the interpreter lock."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool


async def json_from_thread(build: Callable[[], BaseModel]) -> Response:
    """Runs `build` (blocking: it reads the database) on the thread pool and answers with
    its model as JSON."""

    def run() -> bytes:
        return build().model_dump_json().encode()

    return Response(content=await run_in_threadpool(run), media_type="application/json")
