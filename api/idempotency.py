"""`Idempotency-Key` on the POSTs that create work (services/idempotency/service.py has the
rules). A route answers through `Once.answer`, which replays the first answer to a key
already used for the same request and records the answer to a new key in the route's own
unit of work, so the work and its recorded answer commit together or not at all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.orm import Session

from api.deps import ContextDep, DatabaseDep, SessionDep
from services.base import utcnow
from services.db import Database
from services.errors import CairnError
from services.idempotency import service

Model = TypeVar("Model", bound=BaseModel)

KEY_HEADER = Header(
    alias="Idempotency-Key", pattern=r"^[\x21-\x7e]{1,255}$",
    description="Makes a retried POST safe: the same key with the same request answers the "
                "first answer again (for 24 h) without making anything; with another request "
                "it is refused (422). A UUID per request is a good key.")


class AnsweredMeanwhile(Exception):
    """Raised through the route's unit of work (which rolls back, undoing what this attempt
    made) to answer with the first answer instead."""

    def __init__(self, replay: service.Replay) -> None:
        super().__init__("answered by a racing request with the same key")
        self.replay = replay


@dataclass(frozen=True)
class Once:
    session: Session
    db: Database
    project_id: str
    key: str | None
    fingerprint: str

    def answer(self, status_code: int, make: Callable[[], Model],
               keeping: Keeping | None = None) -> Model | JSONResponse:
        """`keeping`: how the answer is stored for replays when part of it may not be
        stored as it is (a secret shown once)."""
        if self.key is None:
            return make()
        now = utcnow()
        replay = service.previous(self.session, self.project_id, self.key, self.fingerprint,
                                  now)
        if replay is not None:
            return _replayed(_opened(replay, keeping))
        try:
            model = make()
        except CairnError:
            # A retry racing the request that made the work: that one committed while this
            # one ran, and its work now refuses this one's (the image it restores into
            # exists). The client asked once, so it gets the first answer.
            raced = self._committed_meanwhile(now)
            if raced is None:
                raise
            raise AnsweredMeanwhile(_opened(raced, keeping)) from None
        body = model.model_dump(mode="json")
        service.remember(self.session, self.project_id, self.key, self.fingerprint,
                         status_code, keeping.seal(body) if keeping else body, now)
        return model

    def _committed_meanwhile(self, now: datetime) -> service.Replay | None:
        """The key's answer as committed since this request began (its own unit of work
        may still see the database as it was then)."""
        with self.db.session() as fresh:
            return service.previous(fresh, self.project_id, self.key or "", self.fingerprint,
                                    now)


@dataclass(frozen=True)
class Keeping:
    seal: Callable[[Any], Any]
    """The answer as stored."""
    open: Callable[[Any], Any]
    """The stored answer as answered again."""


def _opened(replay: service.Replay, keeping: Keeping | None) -> service.Replay:
    if keeping is None:
        return replay
    return service.Replay(replay.status_code, keeping.open(replay.body))


def _replayed(replay: service.Replay) -> JSONResponse:
    return JSONResponse(replay.body, status_code=replay.status_code,
                        headers={"Idempotent-Replayed": "true"})


def install(app: FastAPI) -> None:
    @app.exception_handler(AnsweredMeanwhile)
    async def answered_meanwhile(_request: Request, exc: AnsweredMeanwhile) -> JSONResponse:
        return _replayed(exc.replay)


async def once(request: Request, session: SessionDep, db: DatabaseDep, ctx: ContextDep,
               key: Annotated[str | None, KEY_HEADER] = None) -> Once:
    body = await request.body() if key is not None else b""
    return Once(session, db, ctx.project_id, key,
                service.fingerprint(request.method, request.url.path, body))


OnceDep = Annotated[Once, Depends(once)]
