"""Project quotas: how many restore points and how many bytes a project may keep.

What counts (docs/scheduling.md, "Quotas"): every restore point that is not deleted counts
as one, creating ones included, so a burst of backups cannot overshoot. Storage counts
each restore point's `quota_bytes`: while it is made, the room it reserved; once committed,
what it holds on its target that the previous restore point of its chain (its volume on
that target) does not (`chains.py`, which keeps that figure exact through deletes in any
order); 0 once it holds nothing.

The limit is hard, and every check is made under the project's quota row's lock, together
with the write it admits: a new restore point reserves about what its chain's last one of
the same kind added (`estimate`) and is refused up front when that does not fit; while it
is written, its reservation is raised to what it wrote (`reserve`), and only the raise
that would cross the limit is refused (that job stops; the others go on); and its commit
is admitted only if the project's total after it fits (`admit`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from services.base import utcnow
from services.db import lock_row
from services.errors import QuotaExceeded
from services.records.quotas import ProjectQuota
from services.records.restore_points import RestorePoint
from services.status import RestorePointKind, RestorePointStatus

GIB = 1 << 30
MIB = 1 << 20


def counted() -> ColumnElement[int]:
    """SQL: what a restore point counts against its project's storage quota. A committed
    one that a process of the previous release wrote has no figure yet: its bytes copied
    stand in until its chain is next measured."""
    return func.coalesce(RestorePoint.quota_bytes, RestorePoint.bytes_copied, 0)


@dataclass(frozen=True)
class Usage:
    restore_points: int
    bytes_stored: int


def usage(session: Session, project_id: str) -> Usage:
    count, stored = session.execute(
        select(func.count(), func.coalesce(func.sum(counted()), 0))
        .where(RestorePoint.project_id == project_id,
               RestorePoint.status != RestorePointStatus.DELETED)
    ).one()
    return Usage(int(count or 0), int(stored or 0))


def get(session: Session, project_id: str) -> ProjectQuota:
    quota = session.get(ProjectQuota, project_id)
    return quota or ProjectQuota(project_id=project_id, restore_points=None, max_bytes=None,
                                 updated_at=utcnow())


def set_limits(session: Session, project_id: str, restore_points: int | None,
               max_bytes: int | None) -> ProjectQuota:
    lock_row(session, ProjectQuota.project_id, project_id)
    quota = session.get(ProjectQuota, project_id, populate_existing=True)
    if quota is None:
        quota = ProjectQuota(project_id=project_id)
        session.add(quota)
    quota.restore_points = restore_points
    quota.max_bytes = max_bytes
    quota.gigabytes = None if max_bytes is None else -(-max_bytes // GIB)
    quota.updated_at = utcnow()
    session.flush()
    return quota


GIB_DECIMALS = 9
"""A limit in GiB is answered to 9 decimals (about a byte): 0.1 set reads back 0.1."""


def gib_to_bytes(gigabytes: float) -> int:
    return round(gigabytes * GIB)


def bytes_to_gib(size: int) -> int | float:
    """A limit in bytes as the API answers it: whole GiB as an integer (10, not 10.0), else
    the GiB it was set as (0.1, not 0.09999999962747097)."""
    if size % GIB == 0:
        return size // GIB
    return round(size / GIB, GIB_DECIMALS)


def has_storage_limit(session: Session, project_id: str) -> bool:
    return session.scalar(select(ProjectQuota.max_bytes)
                          .where(ProjectQuota.project_id == project_id)) is not None


def estimate(session: Session, volume_id: str, target: str, kind: RestorePointKind) -> int:
    """The room a new restore point of the volume on the target reserves: what the chain's
    newest restore point of that kind added when it was committed (an incremental's
    changes, a full's data; never what it holds since the ones before it were deleted),
    else what its newest one of any kind added; 0 for the chain's first, whose size nothing
    tells before its data is read (the volume's size would refuse the first backup of
    every thin volume larger than the room left). The job raises its reservation as it
    writes, so a low estimate costs no room that is not there."""
    newest = select(func.coalesce(RestorePoint.added_bytes, RestorePoint.quota_bytes)).where(
        RestorePoint.volume_id == volume_id, RestorePoint.target == target,
        RestorePoint.completed_at.is_not(None),
    ).order_by(RestorePoint.completed_at.desc(), RestorePoint.id.desc()).limit(1)
    found = session.scalar(newest.where(RestorePoint.kind == kind))
    if found is None:
        found = session.scalar(newest)
    return int(found or 0)


def locked(session: Session, project_id: str) -> ProjectQuota | None:
    """The project's quota row, locked until the unit of work ends (None: no limits), with
    the usage read after it current: every check and the write it admits are one step."""
    lock_row(session, ProjectQuota.project_id, project_id)
    return session.get(ProjectQuota, project_id, populate_existing=True)


def shortfall(session: Session, project_id: str, new_points: int,
              new_bytes: int = 0) -> str | None:
    """Why `new_points` more restore points, expected to add `new_bytes`, would exceed the
    project's quota, or None. Locks the quota row: write what it admits in the same unit
    of work."""
    quota = locked(session, project_id)
    if quota is None:
        return None
    used = usage(session, project_id)
    if quota.restore_points is not None and used.restore_points + new_points > quota.restore_points:
        over = used.restore_points + new_points - quota.restore_points
        return (f"restore point quota of project {project_id!r} exceeded: "
                f"{used.restore_points} of {quota.restore_points} used, this needs "
                f"{new_points} more ({over} over). Delete restore points, shorten the "
                "retention, or ask an administrator to raise the quota")
    if quota.max_bytes is not None and (used.bytes_stored >= quota.max_bytes
                                        or used.bytes_stored + new_bytes > quota.max_bytes):
        return _storage_message(project_id, used.bytes_stored, quota.max_bytes, new_bytes)
    return None


def require_room(session: Session, project_id: str, new_points: int,
                 new_bytes: int = 0) -> None:
    reason = shortfall(session, project_id, new_points, new_bytes)
    if reason is not None:
        raise QuotaExceeded(reason, project_id=project_id)


def reserve(session: Session, project_id: str, rp_id: str, held: int, *,
            exactly: bool = False) -> None:
    """Raise a `creating` restore point's reservation to `held` bytes (or, `exactly`, set it:
    its figure as it will be committed), unless that raise takes the project past its
    storage limit: then QuotaExceeded, and nothing changes. Only the raise that crosses is
    refused, so of several jobs racing for the last room, the ones that fit go on."""
    quota = locked(session, project_id)
    rp = session.get(RestorePoint, rp_id, populate_existing=True)
    if rp is None or rp.status != RestorePointStatus.CREATING:
        return
    current = int(rp.quota_bytes or 0)
    if held == current or (held < current and not exactly):
        return
    if held > current and quota is not None and quota.max_bytes is not None:
        used = usage(session, project_id).bytes_stored
        if used - current + held > quota.max_bytes:
            raise QuotaExceeded(_storage_message(project_id, used - current, quota.max_bytes,
                                                 held), project_id=project_id)
    rp.quota_bytes = held
    session.flush()


def admit(session: Session, project_id: str, growth: int) -> None:
    """After writes in this unit of work that grew the project's storage figure by `growth`
    (a commit): raise QuotaExceeded, rolling them back, when the project is now over its
    limit. A change that does not grow the figure is always admitted."""
    if growth <= 0:
        return
    quota = locked(session, project_id)
    if quota is None or quota.max_bytes is None:
        return
    used = usage(session, project_id).bytes_stored
    if used > quota.max_bytes:
        raise QuotaExceeded(_storage_message(project_id, used - growth, quota.max_bytes,
                                             growth), project_id=project_id)


def _storage_message(project_id: str, used: int, limit: int, needs: int) -> str:
    over = max(used + needs - limit, 0) if needs else used - limit
    needs_text = f", this needs about {_amount(needs)} more" if needs else ""
    return (f"storage quota of project {project_id!r} exceeded: {_amount(used)} of "
            f"{_amount(limit)} stored{needs_text} ({_amount(over)} over). Delete restore "
            "points, shorten the retention, or ask an administrator to raise the quota")


def _amount(size: int) -> str:
    """A size as a reader compares it with the limit: GiB, or MiB below one GiB."""
    if abs(size) >= GIB:
        return f"{size / GIB:.2f} GiB"
    return f"{size / MIB:.1f} MiB"
