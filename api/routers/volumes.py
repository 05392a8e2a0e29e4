from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from api.deps import CinderDep, ContextDep, DatabaseDep, NowDep, SessionDep, allowed
from api.errors import error_responses
from api.params import CinderVolumeId, Marker
from api.responses import json_from_thread
from services.errors import InvalidInput
from services.formats import PRINTABLE
from services.openstack.cinder_gateway import CinderGateway
from services.volumes.protection import VolumeList, VolumePublic, get_volume, list_volumes

router = APIRouter(prefix="/v1/volumes", tags=["volumes"])


def _configured(cinder: CinderGateway | None) -> CinderGateway:
    if cinder is None:
        raise InvalidInput("this Cairn has no Cinder configured (CAIRN_CINDER): it protects "
                           "RBD images named as cluster/pool/image")
    return cinder


@router.get("", response_model=VolumeList, responses=error_responses(401, 403, 422, 503),
            summary="The project's Cinder volumes and their protection",
            dependencies=[allowed("volume:list")])
async def get_volumes(
    db: DatabaseDep, ctx: ContextDep, cinder: CinderDep, now: NowDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    marker: Marker = None,
    unprotected: Annotated[bool, Query(description="Only volumes no enabled plan "
                                                   "covers")] = False,
    name: Annotated[str | None, Query(min_length=1, max_length=255, pattern=PRINTABLE,
                                      description="Only volumes of exactly this Cinder name "
                                                  "(names need not be unique)")] = None,
) -> Response:
    """The caller's project's Cinder volumes, newest first, a page at a time: with the plans
    that cover each, their next run, its newest available restore point (and how old it is)
    and its last backup job."""
    gateway = _configured(cinder)

    # One thread-pool trip for Cinder's page, the queries and the JSON: the portal's
    # volume page asks for it beside another list, on the same process. (`session()`, not
    # `reading()`: it takes a connection at its first query, after Cinder has answered.)
    def page() -> VolumeList:
        with db.session() as session:
            return list_volumes(session, ctx, gateway, now, limit=limit, marker=marker,
                                unprotected=unprotected, name=name)

    return await json_from_thread(page)


@router.get("/{volume_id}", response_model=VolumePublic,
            responses=error_responses(401, 403, 404, 422, 503),
            summary="One Cinder volume and its protection",
            dependencies=[allowed("volume:list")])
def get_one_volume(volume_id: CinderVolumeId, session: SessionDep, ctx: ContextDep,
                   cinder: CinderDep, now: NowDep) -> VolumePublic:
    return get_volume(session, ctx, _configured(cinder), now, volume_id)
