"""The project's Cinder volumes with how well each is protected: the plans that cover it and
its newest restore point, so a tenant sees at a glance what is not backed up."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.context import RequestContext
from services.openstack.cinder import CinderGateway
from services.records.plans import Plan, PlanVolume
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import PlanStatus, RestorePointKind, RestorePointStatus, VerifyStatus


class PlanRef(BaseModel):
    id: str
    name: str
    status: PlanStatus


class NewestRestorePoint(BaseModel):
    id: str
    kind: RestorePointKind
    created_at: datetime
    age_seconds: float = Field(description="How old the newest available copy is")
    verify_status: VerifyStatus | None = Field(
        default=None, description="Its last verify's finding (corrupt: it refuses restores); "
                                  "null when never verified")


class VolumePublic(BaseModel):
    id: str = Field(description="The Cinder volume's id")
    name: str
    size_gb: int
    status: str = Field(description="Cinder's status (available, in-use, ...)")
    attached_to: list[str] = Field(description="Servers the volume is attached to")
    volume_type: str | None
    protected: bool = Field(description="An enabled plan covers the volume")
    plans: list[PlanRef]
    restore_points: int = Field(description="Available restore points")
    newest_restore_point: NewestRestorePoint | None


class VolumeList(BaseModel):
    volumes: list[VolumePublic]


def list_volumes(session: Session, ctx: RequestContext, cinder: CinderGateway,
                 now: datetime) -> list[VolumePublic]:
    found = cinder.for_user(ctx).list_volumes()
    rows = session.execute(select(Volume.id, Volume.cinder_volume_id).where(
        Volume.project_id == ctx.project_id,
        Volume.cinder_volume_id.in_([v.id for v in found]))).all()
    row_of = {cinder_id: volume_id for volume_id, cinder_id in rows}
    plans: dict[str, list[PlanRef]] = {}
    for volume_id, plan_id, name, status in session.execute(
            select(PlanVolume.volume_id, Plan.id, Plan.name, Plan.status)
            .join(Plan, Plan.id == PlanVolume.plan_id)
            .where(PlanVolume.volume_id.in_(row_of.values())).order_by(Plan.name)):
        plans.setdefault(volume_id, []).append(PlanRef(id=plan_id, name=name, status=status))
    newest = _newest_restore_points(session, list(row_of.values()), now)
    out = []
    for v in found:
        row = row_of.get(v.id)
        covering = plans.get(row, []) if row else []
        count, latest = newest.get(row, (0, None)) if row else (0, None)
        out.append(VolumePublic(
            id=v.id, name=v.name, size_gb=v.size_gb, status=v.status,
            attached_to=list(v.attached_to), volume_type=v.volume_type,
            protected=any(p.status == PlanStatus.ENABLED for p in covering), plans=covering,
            restore_points=count, newest_restore_point=latest))
    return out


def _newest_restore_points(session: Session, volume_ids: list[str], now: datetime
                           ) -> dict[str, tuple[int, NewestRestorePoint]]:
    """Per volume: how many available restore points, and the newest; one query."""
    newest_first = func.row_number().over(
        partition_by=RestorePoint.volume_id,
        order_by=(RestorePoint.created_at.desc(), RestorePoint.id.desc())).label("n")
    total = func.count().over(partition_by=RestorePoint.volume_id).label("total")
    ranked = (select(RestorePoint.id, RestorePoint.volume_id, RestorePoint.kind,
                     RestorePoint.created_at, RestorePoint.verify_status, newest_first, total)
              .where(RestorePoint.volume_id.in_(volume_ids),
                     RestorePoint.status == RestorePointStatus.AVAILABLE)
              .subquery())
    out: dict[str, tuple[int, NewestRestorePoint]] = {}
    for row in session.execute(select(ranked).where(ranked.c.n == 1)):
        out[row.volume_id] = (row.total, NewestRestorePoint(
            id=row.id, kind=row.kind, created_at=row.created_at,
            age_seconds=round((now - row.created_at).total_seconds(), 1),
            verify_status=row.verify_status))
    return out
