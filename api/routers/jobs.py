from __future__ import annotations

from fastapi import APIRouter

from api.deps import ContextDep, SessionDep
from api.errors import error_responses
from services.jobs import repository
from services.jobs.schemas import JobPublic

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get("/{job_id}", response_model=JobPublic, responses=error_responses(401, 404),
            summary="Show a job")
def get_job(job_id: str, session: SessionDep, ctx: ContextDep) -> JobPublic:
    """Status, progress (bytes done / total), timings and, when it failed, the reason."""
    return JobPublic.of(repository.get(session, ctx, job_id))
