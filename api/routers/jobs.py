from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response

from api.deps import CinderDep, ContextDep, DatabaseDep, SessionDep, allowed
from api.errors import error_responses
from api.params import JobId, Marker, PlanFilter, VolumeFilter
from api.responses import json_from_thread
from services.clock import require_aware
from services.jobs import repository, service
from services.jobs.schemas import JobList, JobPublic, JobUpdate
from services.status import JobKind, JobStatus
from services.volumes import repository as volumes

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get("", response_model=JobList, responses=error_responses(400, 401, 422),
            summary="Job history",
            dependencies=[allowed("job:list")])
async def list_jobs(
    db: DatabaseDep, ctx: ContextDep,
    plan_id: PlanFilter = None,
    volume: VolumeFilter = None,
    kind: Annotated[JobKind | None, Query()] = None,
    status: Annotated[JobStatus | None, Query()] = None,
    since: Annotated[datetime | None, Query(description="Created at or after (ISO 8601)")]
    = None,
    until: Annotated[datetime | None, Query(description="Created before (ISO 8601)")] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="Page size")] = 100,
    marker: Marker = None,
) -> Response:
    """The project's jobs, newest first, filtered by plan, volume, kind, status and the time
    they were created. Skipped slots are jobs too (status `skipped`, with the reason)."""
    since = require_aware(since, "since")
    until = require_aware(until, "until")

    def page() -> JobList:
        with db.reading() as session:
            where = repository.JobFilter(
                plan_id=plan_id, volume_id=volumes.id_for_filter(session, ctx.project_id, volume),
                kind=kind, status=status, since=since, until=until)
            rows, next_marker = repository.list_page(session, ctx, where, limit=limit,
                                                     marker=marker)
        return JobList(jobs=[JobPublic.of(j, j.volume_ref, j.volume_name) for j in rows],
                       next_marker=next_marker)

    return await json_from_thread(page)


@router.get("/{job_id}", response_model=JobPublic, responses=error_responses(401, 404),
            summary="Show a job",
            dependencies=[allowed("job:get")])
def get_job(job_id: JobId, session: SessionDep, ctx: ContextDep) -> JobPublic:
    """Status, progress (bytes done / total, current throughput), timings, the load line
    naming the bottleneck and, when it failed, the reason."""
    return JobPublic.of(repository.get(session, ctx, job_id))


@router.patch("/{job_id}", response_model=JobPublic,
              responses=error_responses(401, 404, 409, 422), summary="Change a job's QoS",
              dependencies=[allowed("job:update")])
def update_job(job_id: JobId, body: JobUpdate, session: SessionDep, ctx: ContextDep) -> JobPublic:
    """Change the bytes/s and operations/s limits of a queued or running backup, restore
    or verify; a running copy follows within a second. `null` removes a limit."""
    return JobPublic.of(service.update_job(session, ctx, job_id, body))


@router.post("/{job_id}/cancel", status_code=202, response_model=JobPublic,
             responses=error_responses(401, 404, 409), summary="Cancel a job",
             dependencies=[allowed("job:cancel")])
def cancel_job(job_id: JobId, session: SessionDep, ctx: ContextDep,
               cinder: CinderDep) -> JobPublic:
    """A job that has not started is cancelled at once. A running one stops within a
    second, removes what it made (a cancelled backup leaves no restore point, snapshot or
    image behind) and then shows `cancelled`."""
    return JobPublic.of(service.cancel(session, ctx, job_id, cinder))
