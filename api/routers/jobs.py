from __future__ import annotations

from fastapi import APIRouter

from api.deps import ContextDep, SessionDep
from api.errors import error_responses
from services.jobs import repository, service
from services.jobs.schemas import JobPublic, JobUpdate

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get("/{job_id}", response_model=JobPublic, responses=error_responses(401, 404),
            summary="Show a job")
def get_job(job_id: str, session: SessionDep, ctx: ContextDep) -> JobPublic:
    """Status, progress (bytes done / total, current throughput), timings, the load line
    naming the bottleneck and, when it failed, the reason."""
    return JobPublic.of(repository.get(session, ctx, job_id))


@router.patch("/{job_id}", response_model=JobPublic,
              responses=error_responses(401, 404, 409, 422), summary="Change a job's QoS")
def update_job(job_id: str, body: JobUpdate, session: SessionDep, ctx: ContextDep) -> JobPublic:
    """Change the bytes/s and operations/s limits of a queued or running backup, restore
    or verify; a running copy follows within a second. `null` removes a limit."""
    return JobPublic.of(service.update_job(session, ctx, job_id, body))


@router.post("/{job_id}/cancel", status_code=202, response_model=JobPublic,
             responses=error_responses(401, 404, 409), summary="Cancel a job")
def cancel_job(job_id: str, session: SessionDep, ctx: ContextDep) -> JobPublic:
    """A job that has not started is cancelled at once. A running one stops within a
    second, removes what it made (a cancelled backup leaves no restore point, snapshot or
    image behind) and then shows `cancelled`."""
    return JobPublic.of(service.cancel(session, ctx, job_id))
