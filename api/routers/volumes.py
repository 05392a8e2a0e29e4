from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from api.deps import ContextDep, DatabaseDep, NowDep, SessionDep, VolumeSourceDep, allowed
from api.errors import error_responses
from api.params import ListedVolumeId, VolumeMarker
from api.responses import json_from_thread
from services.formats import PRINTABLE
from services.volumes.protection import VolumeList, VolumePublic, get_volume, list_volumes

router = APIRouter(prefix="/v1/volumes", tags=["volumes"])


@router.get("", response_model=VolumeList, responses=error_responses(401, 403, 422, 503),
            summary="The project's volumes and their protection",
            dependencies=[allowed("volume:list")])
async def get_volumes(
    db: DatabaseDep, ctx: ContextDep, source: VolumeSourceDep, now: NowDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    marker: VolumeMarker = None,
    unprotected: Annotated[bool, Query(description="Only volumes no enabled plan "
                                                   "covers")] = False,
    name: Annotated[str | None, Query(min_length=1, max_length=255, pattern=PRINTABLE,
                                      description="Only volumes of exactly this Cinder name "
                                                  "(names need not be unique)")] = None,
) -> Response:
    """The caller's project's volumes, a page at a time: its Cinder volumes, newest first,
    or, on a Cairn without Cinder, the RBD images of the volume pools (CAIRN_VOLUME_POOLS)
    by name, each with the plans that cover it, their next run, its newest available
    restore point (and how old it is) and its last backup job."""

    # One thread-pool trip for the source's page, the queries and the JSON: the portal's
    # volume page asks for it beside another list, on the same process. (`session()`, not
    # `reading()`: it takes a connection at its first query, after the source has answered.)
    def page() -> VolumeList:
        with db.session() as session:
            return list_volumes(session, ctx, source, now, limit=limit, marker=marker,
                                unprotected=unprotected, name=name)

    return await json_from_thread(page)


@router.get("/{volume_id:volume}", response_model=VolumePublic,
            responses=error_responses(401, 403, 404, 422, 503),
            summary="One volume and its protection",
            dependencies=[allowed("volume:list")])
def get_one_volume(volume_id: ListedVolumeId, session: SessionDep, ctx: ContextDep,
                   source: VolumeSourceDep, now: NowDep) -> VolumePublic:
    return get_volume(session, ctx, source, now, volume_id)
