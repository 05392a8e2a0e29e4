"""Which restore points a file request may read: the caller's project's own (the cloud's
administrator's: any), and only `available` ones. Another project's restore point or volume
is not found, exactly as a missing one: its existence is not the caller's to learn."""

from __future__ import annotations

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from services.context import RequestContext
from services.errors import RestorePointNotReadable, VolumeNotFound
from services.files import bounds
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.restore_points import repository
from services.status import RestorePointStatus

MAX_VERSIONS = bounds.MAX_VERSIONS
"""Restore points one versions request reads (the file service's own bound: each is a
parser session opened and a file hashed)."""


def readable(session: Session, ctx: RequestContext, rp_id: str) -> RestorePoint:
    """The restore point whose files the caller asks for: RestorePointNotFound unless the
    caller sees it (`repository.get`, the rule of every restore point route), and
    RestorePointNotReadable, naming its status, unless it is `available`."""
    rp = repository.get(session, ctx, rp_id)
    if rp.status != RestorePointStatus.AVAILABLE:
        raise RestorePointNotReadable(
            f"restore point {rp_id} is {rp.status}: only an available restore point's "
            "files can be read", restore_point_id=rp_id, status=str(rp.status))
    return rp


def version_sources(session: Session, ctx: RequestContext, volume_id: str,
                    limit: int) -> list[str]:
    """The restore points a versions request covers: the volume's last `limit` available
    ones, newest first. `volume_id` is Cairn's id of the volume (a restore point's
    `volume_id`) or its Cinder volume's id; a volume the caller does not see is
    VolumeNotFound, as one nobody protects."""
    if not 1 <= limit <= MAX_VERSIONS:
        raise ValueError(f"limit {limit} is outside 1..{MAX_VERSIONS}")
    wanted = volume_id.lower()
    stmt = select(Volume.id, Volume.project_id).where(
        or_(Volume.id == wanted, Volume.cinder_volume_id == wanted))
    if not ctx.is_admin:
        stmt = stmt.where(Volume.project_id == ctx.project_id)
    # Two rows only for an administrator asking by a Cinder id two projects registered (a
    # volume that changed hands): the newest restore points of both are that volume's.
    volumes = session.execute(stmt).all()
    if not volumes:
        raise VolumeNotFound(f"volume {volume_id} not found: no restore point of your "
                             "project is of it", volume=volume_id)
    ids = [v.id for v in volumes]
    return list(session.scalars(
        select(RestorePoint.id)
        .where(RestorePoint.volume_id.in_(ids),
               RestorePoint.project_id.in_({v.project_id for v in volumes}),
               RestorePoint.status == RestorePointStatus.AVAILABLE)
        .order_by(RestorePoint.created_at.desc(), RestorePoint.id.desc())
        .limit(limit)))
