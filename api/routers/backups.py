from __future__ import annotations

from fastapi import APIRouter, Response

from api.deps import ContextDep, SessionDep, SettingsDep, VolumesDep, allowed
from api.errors import error_responses
from api.idempotency import OnceDep
from services.backups import service
from services.backups.schemas import BackupCreate
from services.jobs.schemas import JobPublic

router = APIRouter(prefix="/v1/backups", tags=["backups"])


@router.post("", status_code=202, response_model=JobPublic,
             responses=error_responses(401, 404, 409, 413, 422, 503),
             summary="Back up a volume now",
             dependencies=[allowed("backup:create")])
def create_backup(body: BackupCreate, session: SessionDep, ctx: ContextDep,
                  settings: SettingsDep, volumes_from: VolumesDep,
                  once: OnceDep) -> JobPublic | Response:
    """Queue a backup of the volume: incremental (only what changed since its newest
    restore point on the target) unless `kind` is `full` or there is no usable base.
    Answers with the job; poll `GET /v1/jobs/{id}`.
    The restore point appears at once with status `creating`."""
    return once.answer(202, lambda: JobPublic.of(
        service.create_backup(session, ctx, settings, volumes_from, body)))
