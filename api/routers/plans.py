from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response

from api.deps import ContextDep, NowDep, SessionDep, SettingsDep, VolumesDep, allowed
from api.errors import error_responses
from api.idempotency import OnceDep
from api.params import Marker, PlanId
from services.clock import require_aware
from services.jobs.schemas import JobPublic
from services.plans import repository, service
from services.plans.drafts import DraftPreview, PlanDraft
from services.plans.schemas import (
    NextRuns,
    PlanCreate,
    PlanList,
    PlanPublic,
    PlanUpdate,
    RetentionPreview,
    RunNow,
    RunNowResult,
)
from services.status import PlanStatus

router = APIRouter(prefix="/v1/plans", tags=["plans"])


@router.post("", status_code=201, response_model=PlanPublic,
             responses=error_responses(401, 409, 413, 422, 503), summary="Create a plan",
             dependencies=[allowed("plan:create")])
def create_plan(body: PlanCreate, session: SessionDep, ctx: ContextDep, settings: SettingsDep,
                volumes_from: VolumesDep, once: OnceDep, now: NowDep) -> PlanPublic | Response:
    """Protect volumes on a schedule: cron or RRULE rules (each with a timezone and a kind;
    full wins when two hit the same slot), an optional backup window, retention and QoS."""
    return once.answer(201, lambda: PlanPublic.of(
        service.create_plan(session, ctx, settings, volumes_from, body, now)))


@router.post("/preview", response_model=DraftPreview, responses=error_responses(401, 404, 422),
             summary="What a plan being written would do",
             dependencies=[allowed("plan:get")])
def preview_plan(body: PlanDraft, session: SessionDep, ctx: ContextDep, settings: SettingsDep,
                 now: NowDep) -> DraftPreview:
    """Its rules in words, its next runs, and what its retention would keep of the backups
    its schedule makes (simulated over the last 400 days, fewer for schedules of many runs a
    day). With `plan_id`, also what it would keep and prune of that plan's restore points.
    The rules are checked as saving the plan checks them; nothing is stored."""
    return service.preview_draft(session, ctx, settings, body, now)


@router.get("", response_model=PlanList, responses=error_responses(400, 401, 422),
            summary="List plans",
            dependencies=[allowed("plan:list")])
def list_plans(
    session: SessionDep, ctx: ContextDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    marker: Marker = None,
) -> PlanList:
    rows, next_marker = repository.list_page(session, ctx, limit=limit, marker=marker)
    return PlanList(plans=[PlanPublic.of(p) for p in rows], next_marker=next_marker)


@router.get("/{plan_id}", response_model=PlanPublic, responses=error_responses(401, 404),
            summary="Show a plan",
            dependencies=[allowed("plan:get")])
def get_plan(plan_id: PlanId, session: SessionDep, ctx: ContextDep) -> PlanPublic:
    return PlanPublic.of(repository.get(session, ctx, plan_id))


@router.patch("/{plan_id}", response_model=PlanPublic,
              responses=error_responses(401, 404, 409, 422, 503), summary="Change a plan",
              dependencies=[allowed("plan:update")])
def update_plan(plan_id: PlanId, body: PlanUpdate, session: SessionDep, ctx: ContextDep,
                settings: SettingsDep, volumes_from: VolumesDep, now: NowDep) -> PlanPublic:
    """Fields given replace the plan's. New rules or a new timezone take effect from the
    next slot after now."""
    return PlanPublic.of(service.update_plan(session, ctx, settings, volumes_from, plan_id, body,
                                             now))


@router.delete("/{plan_id}", status_code=204, responses=error_responses(401, 404),
               summary="Delete a plan",
               dependencies=[allowed("plan:delete")])
def delete_plan(plan_id: PlanId, session: SessionDep, ctx: ContextDep, settings: SettingsDep,
                now: NowDep) -> Response:
    """The plan's restore points stay (delete them one by one); its jobs that have not
    started are cancelled."""
    service.delete_plan(session, ctx, settings, plan_id, now)
    return Response(status_code=204)


@router.post("/{plan_id}/pause", response_model=PlanPublic,
             responses=error_responses(401, 404), summary="Pause a plan",
             dependencies=[allowed("plan:update")])
def pause_plan(plan_id: PlanId, session: SessionDep, ctx: ContextDep, now: NowDep) -> PlanPublic:
    """No new scheduled jobs until resumed; jobs already queued or running go on."""
    return PlanPublic.of(service.set_status(session, ctx, plan_id, PlanStatus.PAUSED, now))


@router.post("/{plan_id}/resume", response_model=PlanPublic,
             responses=error_responses(401, 404), summary="Resume a plan",
             dependencies=[allowed("plan:update")])
def resume_plan(plan_id: PlanId, session: SessionDep, ctx: ContextDep,
                now: NowDep) -> PlanPublic:
    """The schedule continues with its next slot after now; slots that fell while the plan
    was paused are not made up."""
    return PlanPublic.of(service.set_status(session, ctx, plan_id, PlanStatus.ENABLED,
                                            now))


@router.post("/{plan_id}/run", status_code=202, response_model=RunNowResult,
             responses=error_responses(401, 404, 413, 422), summary="Run a plan now",
             dependencies=[allowed("plan:run")])
def run_plan(plan_id: PlanId, session: SessionDep, ctx: ContextDep, settings: SettingsDep,
             volumes_from: VolumesDep, once: OnceDep, now: NowDep, body: RunNow | None = None
             ) -> RunNowResult | Response:
    """One backup of each of the plan's volumes now, with its target, QoS and retention
    (not bound to its backup window). Volumes whose backup is already queued or running are
    listed in `skipped`. A plan following a Cinder group backs up the group's volumes as
    Cinder lists them now."""
    def run() -> RunNowResult:
        jobs, skipped = service.run_now(session, ctx, settings, volumes_from, plan_id,
                                        body or RunNow(), now)
        return RunNowResult(jobs=[JobPublic.of(j) for j in jobs], skipped=skipped)

    return once.answer(202, run)


@router.get("/{plan_id}/next-runs", response_model=NextRuns,
            responses=error_responses(401, 404, 422), summary="The plan's next slots",
            dependencies=[allowed("plan:get")])
def next_runs(
    plan_id: PlanId, session: SessionDep, ctx: ContextDep, now: NowDep,
    count: Annotated[int, Query(ge=1, le=1000)] = 10,
    after: Annotated[datetime | None, Query(description="Slots after this time (ISO 8601 "
                                                        "with zone); now when omitted")] = None,
) -> NextRuns:
    """Each slot with its kind, in UTC and on the plan's wall clock, and when its jobs may
    start (the window's opening when the slot falls outside the backup window)."""
    require_aware(after, "after")
    plan = repository.get(session, ctx, plan_id)
    return NextRuns(plan_id=plan.id, runs=service.next_runs(plan, after or now, count))


@router.get("/{plan_id}/retention-preview", response_model=RetentionPreview,
            responses=error_responses(401, 404), summary="What retention keeps",
            dependencies=[allowed("plan:get")])
def retention_preview(plan_id: PlanId, session: SessionDep, ctx: ContextDep,
                      now: NowDep) -> RetentionPreview:
    """Every available restore point of the plan, newest first per volume: kept (and by
    which rules) or to be pruned by the next prune."""
    plan = repository.get(session, ctx, plan_id)
    return service.retention_preview(session, plan, now)
