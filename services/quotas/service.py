"""Project quotas: how many restore points and how many GiB a project may keep. Usage counts
every restore point that is not deleted (creating ones included, so a burst of backups
cannot overshoot), and "stored" is the sum of the bytes each restore point copied (a full
its allocated data, an incremental what changed)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.base import utcnow
from services.errors import QuotaExceeded
from services.records.quotas import ProjectQuota
from services.records.restore_points import RestorePoint
from services.status import RestorePointStatus

GIB = 1 << 30


@dataclass(frozen=True)
class Usage:
    restore_points: int
    bytes_stored: int


def usage(session: Session, project_id: str) -> Usage:
    count, stored = session.execute(
        select(func.count(), func.coalesce(func.sum(RestorePoint.bytes_copied), 0))
        .where(RestorePoint.project_id == project_id,
               RestorePoint.status != RestorePointStatus.DELETED)
    ).one()
    return Usage(int(count or 0), int(stored or 0))


def get(session: Session, project_id: str) -> ProjectQuota:
    quota = session.get(ProjectQuota, project_id)
    return quota or ProjectQuota(project_id=project_id, restore_points=None, gigabytes=None,
                                 updated_at=utcnow())


def set_limits(session: Session, project_id: str, restore_points: int | None,
               gigabytes: int | None) -> ProjectQuota:
    quota = session.get(ProjectQuota, project_id)
    if quota is None:
        quota = ProjectQuota(project_id=project_id)
        session.add(quota)
    quota.restore_points = restore_points
    quota.gigabytes = gigabytes
    quota.updated_at = utcnow()
    session.flush()
    return quota


def shortfall(session: Session, project_id: str, new_points: int) -> str | None:
    """Why `new_points` more restore points would exceed the project's quota, or None."""
    quota = session.get(ProjectQuota, project_id)
    if quota is None:
        return None
    used = usage(session, project_id)
    if quota.restore_points is not None and used.restore_points + new_points > quota.restore_points:
        over = used.restore_points + new_points - quota.restore_points
        return (f"restore point quota of project {project_id!r} exceeded: "
                f"{used.restore_points} of {quota.restore_points} used, this needs "
                f"{new_points} more ({over} over). Delete restore points, shorten the "
                "retention, or ask an administrator to raise the quota")
    if quota.gigabytes is not None and used.bytes_stored >= quota.gigabytes * GIB:
        over_gib = (used.bytes_stored - quota.gigabytes * GIB) / GIB
        return (f"storage quota of project {project_id!r} exceeded: "
                f"{used.bytes_stored / GIB:.2f} GiB of {quota.gigabytes} GiB stored "
                f"({over_gib:.2f} GiB over). Delete restore points, shorten the retention, or ask "
                "an administrator to raise the quota")
    return None


def require_room(session: Session, project_id: str, new_points: int) -> None:
    reason = shortfall(session, project_id, new_points)
    if reason is not None:
        raise QuotaExceeded(reason, project_id=project_id)
