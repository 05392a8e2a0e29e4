from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from api.deps import (
    CinderDep,
    ClustersDep,
    ContextDep,
    DatabaseDep,
    NowDep,
    PolicyDep,
    SessionDep,
    SettingsDep,
    allowed,
)
from api.errors import VOLUME_FILTER, error_responses
from api.idempotency import OnceDep
from api.params import Marker, PlanFilter, RestorePointId, VolumeFilter
from api.responses import json_from_thread
from services.formats import VOLUME_REF
from services.jobs.schemas import JobPublic
from services.restore_points import copies, repository, service
from services.restore_points.calendar import RestorePointCalendar, calendar
from services.restore_points.schemas import (
    CopyCreate,
    RestoreCreate,
    RestorePointList,
    RestorePointPublic,
    RestorePointUpdate,
    VerifyCreate,
)
from services.volumes import repository as volumes

router = APIRouter(prefix="/v1/restore-points", tags=["restore points"])


@router.get("", response_model=RestorePointList, responses=error_responses(400, 401, 422),
            summary="List restore points",
            dependencies=[allowed("restore_point:list")])
async def list_restore_points(
    db: DatabaseDep, ctx: ContextDep,
    volume: VolumeFilter = None,
    plan_id: PlanFilter = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="Page size")] = 100,
    marker: Marker = None,
) -> Response:
    """The project's restore points, newest first."""

    def page() -> RestorePointList:
        with db.reading() as session:
            volume_id = volumes.id_for_filter(session, ctx.project_id, volume)
            rows, next_marker = repository.list_page(session, ctx, volume_id=volume_id,
                                                     limit=limit, marker=marker, plan_id=plan_id)
        return RestorePointList(
            restore_points=[RestorePointPublic.of(r, r.volume_ref, r.volume_name) for r in rows],
            next_marker=next_marker)

    return await json_from_thread(page)


@router.get("/days", response_model=RestorePointCalendar,
            responses=error_responses(401, 422), summary="Restore points per day",
            dependencies=[allowed("restore_point:list")])
def restore_point_days(
    session: SessionDep, ctx: ContextDep, now: NowDep,
    volume: Annotated[str, Query(pattern=VOLUME_REF, description=VOLUME_FILTER)],
    timezone: Annotated[str, Query(max_length=64, description="The days of this IANA "
                                                               "zone (the user's)")] = "UTC",
    days: Annotated[int, Query(ge=1, le=1100, description="How many days back, today "
                                                           "included")] = 90,
) -> RestorePointCalendar:
    """A volume's available restore points counted per day (full and incremental), for a
    calendar: one answer for the whole span, however many restore points it holds."""
    volume_id = volumes.id_for_filter(session, ctx.project_id, volume) or ""
    return calendar(session, ctx, volume_id, timezone, days, now)


@router.get("/{restore_point_id}", response_model=RestorePointPublic,
            responses=error_responses(401, 404), summary="Show a restore point",
            dependencies=[allowed("restore_point:get")])
def get_restore_point(restore_point_id: RestorePointId, session: SessionDep,
                      ctx: ContextDep) -> RestorePointPublic:
    return RestorePointPublic.of(repository.get(session, ctx, restore_point_id))


@router.patch("/{restore_point_id}", response_model=RestorePointPublic,
              responses=error_responses(401, 403, 404, 409, 422),
              summary="Lock or unlock a restore point",
              dependencies=[allowed("restore_point:update")])
def update_restore_point(restore_point_id: RestorePointId, body: RestorePointUpdate,
                         session: SessionDep, ctx: ContextDep, now: NowDep) -> RestorePointPublic:
    """A locked restore point is kept by every prune and the orphan reconciler, and refuses
    deletion (409 naming the date) until the time. A member may lock or extend a lock; only
    an administrator may shorten or remove one in force (403)."""
    return RestorePointPublic.of(service.set_lock(session, ctx, restore_point_id,
                                                  body.locked_until, now))


@router.post("/{restore_point_id}/restore", status_code=202, response_model=JobPublic,
             responses=error_responses(401, 404, 409, 422, 503),
             summary="Restore into a new image, a new Cinder volume or a volume in place",
             dependencies=[allowed("restore_point:restore")])
def restore(restore_point_id: RestorePointId, body: RestoreCreate, session: SessionDep,
            ctx: ContextDep, settings: SettingsDep, clusters: ClustersDep,
            cinder: CinderDep, policy: PolicyDep, once: OnceDep) -> JobPublic | Response:
    """Queue a restore of the restore point: into a new RBD image (`target`, never over an
    existing one), into a new Cinder volume (`new_volume`, created now with your token), or
    in place over a detached Cinder volume (`volume_id`; an attached one is refused, 409).
    Answers with the job; a Cinder restore names its volume in `restore_volume_id`."""
    if body.cinder_backup:
        policy.enforce("restore_point:restore_for_cinder_backup", ctx)
    return once.answer(202, lambda: JobPublic.of(service.start_restore(
        session, ctx, settings, clusters, cinder, restore_point_id, body)))


@router.delete("/{restore_point_id}", status_code=202, response_model=JobPublic,
               responses=error_responses(401, 404, 409), summary="Delete a restore point",
               dependencies=[allowed("restore_point:delete")])
def delete_restore_point(restore_point_id: RestorePointId, session: SessionDep, ctx: ContextDep,
                         settings: SettingsDep, now: NowDep) -> JobPublic:
    """Queue the deletion of the restore point's backup snapshot (and of the backup image
    when it was the volume's last restore point there). Any restore point can be deleted,
    in any order; one being restored or created answers 409."""
    job = service.delete_restore_point(session, ctx, settings, restore_point_id, now)
    return JobPublic.of(job)


@router.post("/{restore_point_id}/verify", status_code=202, response_model=JobPublic,
             responses=error_responses(401, 404, 409, 422), summary="Verify a restore point",
             dependencies=[allowed("restore_point:verify")])
def verify(restore_point_id: RestorePointId, session: SessionDep, ctx: ContextDep,
           settings: SettingsDep, once: OnceDep,
           body: VerifyCreate | None = None) -> JobPublic | Response:
    """Queue a job that re-reads the restore point from the backup pool and compares every
    object with the checksum recorded at backup time. The result (`verification`: verified
    at, corrupt objects) is recorded on the restore point; a corrupt one fails the job."""
    return once.answer(202, lambda: JobPublic.of(service.start_verify(
        session, ctx, settings, restore_point_id, body or VerifyCreate())))


@router.post("/{restore_point_id}/copy", status_code=202, response_model=JobPublic,
             responses=error_responses(401, 404, 409, 413, 422),
             summary="Copy a restore point off site",
             dependencies=[allowed("restore_point:copy")])
def copy(restore_point_id: RestorePointId, body: CopyCreate, session: SessionDep,
         ctx: ContextDep, settings: SettingsDep, once: OnceDep) -> JobPublic | Response:
    """Queue a copy of the restore point, read from its backup pool (not from the volume), to
    an object target. The copy is a restore point of its own (`copied_from_restore_point_id`)
    at the same instant; the job's `restore_point_id` names it. It sends only the chunks
    the target lacks: after a first copy of the volume, little more than what changed.
    It counts against the project's quotas as a backup does (413 when they leave no room)."""
    return once.answer(202, lambda: JobPublic.of(copies.start_copy(
        session, ctx, settings, restore_point_id, body)))
