from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from api.deps import CinderDep, ClustersDep, ContextDep, SessionDep, SettingsDep, allowed
from api.errors import error_responses
from api.idempotency import OnceDep
from services.formats import UUID
from services.jobs.schemas import JobList, JobPublic
from services.records.groups import RestorePointGroup
from services.records.restore_points import RestorePoint
from services.restore_points import groups
from services.restore_points.schemas import (
    GroupRestoreCreate,
    RestorePointGroupPublic,
    RestorePointPublic,
)
from services.status import RestorePointStatus

router = APIRouter(prefix="/v1/restore-point-groups", tags=["restore points"])

GroupId = Annotated[str, Path(pattern=UUID, description="The group restore point's id")]


def _public(group: RestorePointGroup, members: list[RestorePoint]) -> RestorePointGroupPublic:
    return RestorePointGroupPublic(
        id=group.id, project_id=group.project_id, plan_id=group.plan_id,
        taken_at=group.taken_at,
        complete=bool(members) and all(m.status == RestorePointStatus.AVAILABLE
                                       for m in members),
        restore_points=[RestorePointPublic.of(m) for m in members],
        created_at=group.created_at)


@router.get("/{group_id}", response_model=RestorePointGroupPublic,
            responses=error_responses(401, 404), summary="Show a group restore point",
            dependencies=[allowed("restore_point_group:get")])
def get_group(group_id: GroupId, session: SessionDep,
              ctx: ContextDep) -> RestorePointGroupPublic:
    """The restore points one run of a `consistency: group` plan made from one RBD group
    snapshot: its volumes at the same instant (`taken_at`)."""
    return _public(*groups.get(session, ctx, group_id))


@router.post("/{group_id}/restore", status_code=202, response_model=JobList,
             responses=error_responses(401, 404, 409, 422, 503),
             summary="Restore every volume of a group restore point",
             dependencies=[allowed("restore_point_group:restore")])
def restore_group(group_id: GroupId, body: GroupRestoreCreate, session: SessionDep,
                  ctx: ContextDep, settings: SettingsDep, clusters: ClustersDep,
                  cinder: CinderDep, once: OnceDep) -> JobList | Response:
    """Queue one restore per member, all or none: into new Cinder volumes (`name_prefix`),
    new RBD images (`target_prefix`), or in place (`in_place`, every volume detached).
    A member that cannot be restored refuses the request with its reason."""
    return once.answer(202, lambda: JobList(
        jobs=[JobPublic.of(j) for j in groups.restore(session, ctx, settings, clusters,
                                                      cinder, group_id, body)],
        next_marker=None))
