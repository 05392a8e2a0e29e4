from __future__ import annotations

from fastapi import APIRouter

from api.deps import CinderDep, ContextDep, NowDep, SessionDep, allowed
from api.errors import error_responses
from services.overview.summary import ProtectionOverview, overview

router = APIRouter(prefix="/v1/overview", tags=["volumes"])


@router.get("", response_model=ProtectionOverview, responses=error_responses(401, 403, 503),
            summary="The project's protection at a glance",
            dependencies=[allowed("volume:list")])
def get_overview(session: SessionDep, ctx: ContextDep, cinder: CinderDep,
                 now: NowDep) -> ProtectionOverview:
    """How many of the project's Cinder volumes an enabled plan covers, the covered volumes
    that fell behind their plan (newest restore point older than 1.5 times the plan's
    interval), and the next runs."""
    return overview(session, ctx, cinder, now)
