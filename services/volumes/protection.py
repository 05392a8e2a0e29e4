"""The project's volumes with how well each is protected: the plans that cover it and its
newest restore point, so a tenant sees at a glance what is not backed up. Which volumes
there are is the source's to say (`source.py`: Cinder's, or the RBD images of the volume
pools)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field
from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from services.context import RequestContext
from services.records.jobs import Job
from services.records.plans import Plan, PlanVolume
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import (
    JobKind,
    JobStatus,
    PlanStatus,
    RestorePointKind,
    RestorePointStatus,
    VerifyStatus,
)
from services.volumes.source import SourceVolume, VolumeKind, VolumeSource

GiB = 1 << 30


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


class LastBackup(BaseModel):
    job_id: str
    status: JobStatus
    kind: RestorePointKind | None = Field(description="full or incremental, as asked")
    at: datetime = Field(description="When it finished; when it was queued while not yet "
                                     "finished")
    error: str | None = Field(description="Why it failed, when it did")


class VolumePublic(BaseModel):
    id: str = Field(description="The Cinder volume's id; without Cinder, the RBD image as "
                                "cluster/pool/image")
    name: str
    kind: VolumeKind = Field(description="cinder: a Cinder volume (restored into a new "
                                         "Cinder volume or over itself); rbd_image: an RBD "
                                         "image, without Cinder (restored into a new image)")
    size_gb: int = Field(description="Its size in GiB (an RBD image's rounded up)")
    size_bytes: int = Field(description="Its size in bytes")
    status: str = Field(description="Cinder's status (available, in-use, ...); an RBD "
                                    "image's is available")
    attached_to: list[str] = Field(description="Servers the volume is attached to")
    volume_type: str | None
    protected: bool = Field(description="An enabled plan covers the volume")
    plans: list[PlanRef]
    next_run_at: datetime | None = Field(description="The earliest next slot of its enabled "
                                                     "plans (UTC)")
    restore_points: int = Field(description="Available restore points")
    newest_restore_point: NewestRestorePoint | None
    last_backup: LastBackup | None = Field(description="Its newest backup job, whatever "
                                                       "became of it")


class VolumeList(BaseModel):
    volumes: list[VolumePublic]
    next_marker: str | None = Field(description="Pass as `marker` for the next page; null "
                                                "on the last")


UNPROTECTED_SCAN_PAGE = 100
"""Volumes read per call while looking for unprotected ones (`limit` if larger)."""
UNPROTECTED_SCAN_PAGES = 20
"""Pages of the source one request reads at most looking for them; then the page ends early, with
the marker to go on from."""


def list_volumes(session: Session, ctx: RequestContext, source: VolumeSource, now: datetime,
                 *, limit: int, marker: str | None, unprotected: bool = False,
                 name: str | None = None) -> VolumeList:
    """A page of the project's volumes in the source's order (Cinder's: newest first), read a
    page at a time from the source. `unprotected` reads on until the page is full of volumes
    no enabled plan covers, or it has read UNPROTECTED_SCAN_PAGES pages: a project whose
    volumes are nearly all protected gets short pages (each with its `next_marker`), never a
    request that asks the source once per volume. With `name`, only the volumes of exactly
    that name (how a client finds the volume a user names, as `openstack volume show NAME`
    does: none, one, or several to choose from)."""
    if marker is not None:
        marker = source.check_marker(ctx, marker)
    page_size = max(limit, UNPROTECTED_SCAN_PAGE) if unprotected else limit
    out: list[VolumePublic] = []
    for _ in range(UNPROTECTED_SCAN_PAGES):
        page = source.page(ctx, limit=page_size, marker=marker, name=name)
        for volume in _with_protection(session, ctx, source, page.volumes, now):
            if unprotected and volume.protected:
                continue
            out.append(volume)
            if len(out) == limit:
                return VolumeList(volumes=out, next_marker=page.next_marker
                                  if volume.id == page.last_read else volume.id)
        if page.next_marker is None or not unprotected:
            return VolumeList(volumes=out, next_marker=page.next_marker)
        marker = page.next_marker
    return VolumeList(volumes=out, next_marker=marker)


def get_volume(session: Session, ctx: RequestContext, source: VolumeSource, now: datetime,
               volume_id: str) -> VolumePublic:
    return _with_protection(session, ctx, source, [source.one(ctx, volume_id)], now)[0]


def _with_protection(session: Session, ctx: RequestContext, source: VolumeSource,
                     found: list[SourceVolume], now: datetime) -> list[VolumePublic]:
    row_of = source.registered(session, ctx, [v.id for v in found])
    plans: dict[str, list[PlanRef]] = {}
    next_runs: dict[str, datetime] = {}
    for volume_id, plan_id, name, status, next_slot in session.execute(
            select(PlanVolume.volume_id, Plan.id, Plan.name, Plan.status, Plan.next_slot_at)
            .join(Plan, Plan.id == PlanVolume.plan_id)
            .where(PlanVolume.volume_id.in_(row_of.values())).order_by(Plan.name)):
        plans.setdefault(volume_id, []).append(PlanRef(id=plan_id, name=name, status=status))
        if status == PlanStatus.ENABLED and next_slot is not None:
            next_runs[volume_id] = min(next_slot, next_runs.get(volume_id, next_slot))
    newest = _newest_restore_points(session, list(row_of.values()), now)
    last_backups = _last_backups(session, list(row_of.values()))
    out = []
    for v in found:
        row = row_of.get(v.id)
        covering = plans.get(row, []) if row else []
        count, latest = newest.get(row, (0, None)) if row else (0, None)
        out.append(VolumePublic(
            id=v.id, name=v.name, size_gb=-(-v.size_bytes // GiB), size_bytes=v.size_bytes,
            kind=v.kind, status=v.status, attached_to=list(v.attached_to),
            volume_type=v.volume_type,
            protected=any(p.status == PlanStatus.ENABLED for p in covering), plans=covering,
            next_run_at=next_runs.get(row) if row else None,
            restore_points=count, newest_restore_point=latest,
            last_backup=last_backups.get(row) if row else None))
    return out


def _newest_ids(session: Session, record: type[Job] | type[RestorePoint],
                condition: ColumnElement[bool], volume_ids: list[str]) -> list[str]:
    """The id of each volume's newest row of `record` meeting `condition`: one probe of the
    (volume_id, created_at) index per volume, however many rows a volume has."""
    newest = (select(record.id).where(record.volume_id == Volume.id, condition)
              .order_by(record.created_at.desc(), record.id.desc()).limit(1)
              .correlate(Volume).scalar_subquery())
    return [row_id for row_id in session.scalars(select(newest).where(
        Volume.id.in_(volume_ids))) if row_id is not None]


def _last_backups(session: Session, volume_ids: list[str]) -> dict[str, LastBackup]:
    """Per volume, its newest backup job: an index probe per volume (a volume backed up
    nightly for years has thousands of jobs), then the jobs found by id."""
    job_ids = _newest_ids(session, Job, Job.kind == JobKind.BACKUP, volume_ids)
    return {row.volume_id: LastBackup(
        job_id=row.id, status=row.status, kind=row.backup_kind,
        at=row.finished_at or row.created_at, error=row.error_message)
        for row in session.execute(
            select(Job.id, Job.volume_id, Job.status, Job.backup_kind, Job.created_at,
                   Job.finished_at, Job.error_message).where(Job.id.in_(job_ids)))}


def _newest_restore_points(session: Session, volume_ids: list[str], now: datetime
                           ) -> dict[str, tuple[int, NewestRestorePoint]]:
    """Per volume: how many available restore points, and the newest (an index probe per
    volume, then the restore points found by id)."""
    available = RestorePoint.status == RestorePointStatus.AVAILABLE
    counts = dict(session.execute(
        select(RestorePoint.volume_id, func.count())
        .where(RestorePoint.volume_id.in_(volume_ids), available)
        .group_by(RestorePoint.volume_id)).all())
    point_ids = _newest_ids(session, RestorePoint, available,
                            [v for v in volume_ids if v in counts])
    out: dict[str, tuple[int, NewestRestorePoint]] = {}
    for row in session.execute(
            select(RestorePoint.id, RestorePoint.volume_id, RestorePoint.kind,
                   RestorePoint.created_at, RestorePoint.verify_status)
            .where(RestorePoint.id.in_(point_ids))):
        out[row.volume_id] = (counts[row.volume_id], NewestRestorePoint(
            id=row.id, kind=row.kind, created_at=row.created_at,
            age_seconds=round((now - row.created_at).total_seconds(), 1),
            verify_status=row.verify_status))
    return out
