from __future__ import annotations

from fastapi import APIRouter

from api.deps import CinderDep, ContextDep, NowDep, SessionDep, allowed
from api.errors import error_responses
from services.errors import InvalidInput
from services.volumes.protection import VolumeList, list_volumes

router = APIRouter(prefix="/v1/volumes", tags=["volumes"])


@router.get("", response_model=VolumeList, responses=error_responses(401, 403, 422, 503),
            summary="The project's Cinder volumes and their protection",
            dependencies=[allowed("volume:list")])
def get_volumes(session: SessionDep, ctx: ContextDep, cinder: CinderDep,
                now: NowDep) -> VolumeList:
    """Every Cinder volume of the caller's project, with the plans that cover it and its
    newest available restore point (and how old it is)."""
    if cinder is None:
        raise InvalidInput("this Cairn has no Cinder configured (CAIRN_CINDER): it protects "
                           "RBD images named as cluster/pool/image")
    return VolumeList(volumes=list_volumes(session, ctx, cinder, now))
