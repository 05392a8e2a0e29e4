from __future__ import annotations

from datetime import timedelta
from typing import Literal

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from api.deps import ClustersDep, DatabaseDep, SettingsDep, allowed
from api.errors import error_responses
from services.restore_points.orphans import OrphanReconciler

router = APIRouter(prefix="/v1/orphans", tags=["orphans"])


class FindingPublic(BaseModel):
    action: Literal["remove", "flag", "report"] = Field(
        description="remove: no row owns it; flag: an available restore point whose data is "
                    "gone becomes error; report: left alone (not Cairn's to remove)")
    what: str
    location: str = Field(description="cluster/pool/name[@snapshot]")
    reason: str = Field(description="The row the reconciler did not find, or what is wrong")
    restore_point_id: str | None


class OrphanReport(BaseModel):
    findings: list[FindingPublic]
    errors: list[str] = Field(description="Pools or volumes that could not be scanned")
    grace_seconds: float


@router.get("", response_model=OrphanReport, responses=error_responses(401, 403),
            summary="What the orphan reconciler would remove or flag now (a dry run)",
            dependencies=[allowed("orphan:list")])
async def list_orphans(db: DatabaseDep, clusters: ClustersDep, settings: SettingsDep,
                       grace_seconds: float | None = Query(
                           default=None, ge=0, le=10 * 365 * 86400,
                           description="Override the configured grace period")) -> OrphanReport:
    """Compares every `cairn.*` object in the backup pools, and the `cairn.*` snapshots of
    protected volumes, with the rows; changes nothing. cairn-scheduler runs the same scan
    every `orphan_interval_seconds` and acts on it (unless `orphan_dry_run`). Lists whole
    pools: an operator's tool, not a page to poll."""
    grace = settings.orphan_grace_seconds if grace_seconds is None else grace_seconds
    report = await run_in_threadpool(OrphanReconciler(db, clusters, settings).run,
                                     apply=False, grace=timedelta(seconds=grace))
    return OrphanReport(
        findings=[FindingPublic(action=f.action, what=f.what, location=f.location,
                                reason=f.reason, restore_point_id=f.restore_point_id)
                  for f in report.findings],
        errors=report.errors, grace_seconds=grace)
