from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from api.deps import SessionDep

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness and database reachability")
def healthz(session: SessionDep) -> dict[str, str]:
    session.execute(text("SELECT 1"))
    return {"status": "ok"}
