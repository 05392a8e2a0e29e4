"""`Idempotency-Key` on the POSTs that create work (services/idempotency/service.py has the
rules). A route answers through `Once.answer`, which replays the first answer to a key
already used for the same request and records the answer to a new key in the route's own
unit of work, so the work and its recorded answer commit together or not at all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.orm import Session

from api.deps import ContextDep, SessionDep
from services.base import utcnow
from services.idempotency import service

Model = TypeVar("Model", bound=BaseModel)

KEY_HEADER = Header(
    alias="Idempotency-Key", pattern=r"^[\x21-\x7e]{1,255}$",
    description="Makes a retried POST safe: the same key with the same request answers the "
                "first answer again (for 24 h) without making anything; with another request "
                "it is refused (422). A UUID per request is a good key.")


@dataclass(frozen=True)
class Once:
    session: Session
    project_id: str
    key: str | None
    fingerprint: str

    def answer(self, status_code: int, make: Callable[[], Model]) -> Model | JSONResponse:
        if self.key is None:
            return make()
        now = utcnow()
        replay = service.previous(self.session, self.project_id, self.key, self.fingerprint,
                                  now)
        if replay is not None:
            return JSONResponse(replay.body, status_code=replay.status_code,
                                headers={"Idempotent-Replayed": "true"})
        model = make()
        service.remember(self.session, self.project_id, self.key, self.fingerprint,
                         status_code, model.model_dump(mode="json"), now)
        return model


async def once(request: Request, session: SessionDep, ctx: ContextDep,
               key: Annotated[str | None, KEY_HEADER] = None) -> Once:
    body = await request.body() if key is not None else b""
    return Once(session, ctx.project_id, key,
                service.fingerprint(request.method, request.url.path, body))


OnceDep = Annotated[Once, Depends(once)]
