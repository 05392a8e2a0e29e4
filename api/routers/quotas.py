from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.orm import Session

from api.deps import ContextDep, SessionDep, allowed
from api.errors import error_responses
from api.params import ProjectId
from services.quotas import service
from services.quotas.schemas import ProjectQuotaPublic, QuotaLimits, QuotaUsage

router = APIRouter(tags=["quotas"])


@router.get("/v1/usage", response_model=ProjectQuotaPublic, responses=error_responses(401),
            summary="The caller's project: quota and usage",
            dependencies=[allowed("usage:get")])
def my_usage(session: SessionDep, ctx: ContextDep) -> ProjectQuotaPublic:
    return _public(session, ctx.project_id)


@router.get("/v1/quotas/{project_id}", response_model=ProjectQuotaPublic,
            responses=error_responses(401, 403), summary="A project's quota and usage (admin)",
            dependencies=[allowed("quota:get", project_param="project_id")])
def get_quota(project_id: ProjectId, session: SessionDep) -> ProjectQuotaPublic:
    return _public(session, project_id)


@router.put("/v1/quotas/{project_id}", response_model=ProjectQuotaPublic,
            responses=error_responses(401, 403, 422), summary="Set a project's quota (admin)",
            dependencies=[allowed("quota:update", project_param="project_id")])
def set_quota(project_id: ProjectId, body: QuotaLimits, session: SessionDep) -> ProjectQuotaPublic:
    """Limits apply to new restore points (backups and off-site copies): requests answer
    413 over quota, a scheduled backup over quota fails with the reason, and a running one
    stops once the project is over its storage limit (docs/scheduling.md, Quotas). Nothing
    existing is deleted."""
    max_bytes = None if body.gigabytes is None else service.gib_to_bytes(body.gigabytes)
    service.set_limits(session, project_id, body.restore_points, max_bytes)
    return _public(session, project_id)


def _public(session: Session, project_id: str) -> ProjectQuotaPublic:
    quota = service.get(session, project_id)
    used = service.usage(session, project_id)
    return ProjectQuotaPublic(
        project_id=project_id,
        limits=QuotaLimits(restore_points=quota.restore_points,
                           gigabytes=None if quota.max_bytes is None
                           else service.bytes_to_gib(quota.max_bytes)),
        usage=QuotaUsage(restore_points=used.restore_points,
                         gigabytes_stored=round(used.bytes_stored / service.GIB, 6),
                         bytes_stored=used.bytes_stored))
