"""Project quotas: how many restore points and how many bytes a project may keep.

What counts (the decision is in docs/scheduling.md, "Quotas"): every restore point that is
not deleted counts as one, creating ones included, so a burst of backups cannot overshoot.
Storage counts what the project costs on its targets, before compression, the same on
every kind of target: each restore point's `quota_bytes`, the non-zero data it added to its
volume's chain on its target (a full: all its data; an incremental or a copy: what the
previous restore point of the chain did not hold). A restore point deleted while later
ones of its chain still hold its data hands its bytes on to them (up to each one's volume
size), so deleting the full under a chain of incrementals frees nothing the target keeps.
Compression and deduplication across volumes are the operator's savings, not a way around
the limit.

The limit is hard. A new restore point reserves what its chain's last one of the same kind
added (`estimate`) and is refused up front when that does not fit; while it is written,
the worker raises its reservation to what it wrote and stops it once the project is over
its limit (`reserve` then `excess`, each in its own transaction); and it becomes
`available` only after a last such check, so no restore point is ever kept over the limit."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import case, func, select, update
from sqlalchemy.orm import Session

from services.base import utcnow
from services.errors import QuotaExceeded
from services.records.quotas import ProjectQuota
from services.records.restore_points import RestorePoint
from services.status import RestorePointKind, RestorePointStatus

GIB = 1 << 30
MIB = 1 << 20

HOLDING = (RestorePointStatus.AVAILABLE, RestorePointStatus.DELETING, RestorePointStatus.ERROR)
"""Restore points whose data may be on their target (an `error` one may be a failed delete's
remains): the ones a deleted restore point's bytes move on to."""


@dataclass(frozen=True)
class Usage:
    restore_points: int
    bytes_stored: int


def usage(session: Session, project_id: str) -> Usage:
    count, stored = session.execute(
        select(func.count(), func.coalesce(func.sum(RestorePoint.quota_bytes), 0))
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
    quota = session.get(ProjectQuota, project_id)
    if quota is None:
        quota = ProjectQuota(project_id=project_id)
        session.add(quota)
    quota.restore_points = restore_points
    quota.max_bytes = max_bytes
    quota.updated_at = utcnow()
    session.flush()
    return quota


def has_storage_limit(session: Session, project_id: str) -> bool:
    return session.scalar(select(ProjectQuota.max_bytes)
                          .where(ProjectQuota.project_id == project_id)) is not None


def estimate(session: Session, volume_id: str, target: str, kind: RestorePointKind) -> int:
    """The room a new restore point of the volume on the target reserves: what the chain's
    newest available restore point of that kind added (an incremental's changes, a full's
    data), else what its newest one of any kind added; 0 for the chain's first, whose size
    nothing tells before its data is read (the volume's size would refuse the first
    backup of every thin volume larger than the room left)."""
    newest = select(RestorePoint.quota_bytes).where(
        RestorePoint.volume_id == volume_id, RestorePoint.target == target,
        RestorePoint.status == RestorePointStatus.AVAILABLE,
    ).order_by(RestorePoint.created_at.desc(), RestorePoint.id.desc()).limit(1)
    found = session.scalar(newest.where(RestorePoint.kind == kind))
    if found is None:
        found = session.scalar(newest)
    return int(found or 0)


def shortfall(session: Session, project_id: str, new_points: int,
              new_bytes: int = 0) -> str | None:
    """Why `new_points` more restore points, expected to add `new_bytes`, would exceed the
    project's quota, or None."""
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
    if quota.max_bytes is not None and (used.bytes_stored >= quota.max_bytes
                                        or used.bytes_stored + new_bytes > quota.max_bytes):
        return _storage_message(project_id, used.bytes_stored, quota.max_bytes, new_bytes)
    return None


def require_room(session: Session, project_id: str, new_points: int,
                 new_bytes: int = 0) -> None:
    reason = shortfall(session, project_id, new_points, new_bytes)
    if reason is not None:
        raise QuotaExceeded(reason, project_id=project_id)


def reserve(session: Session, rp_id: str, held: int, *, exactly: bool = False) -> None:
    """Raise a `creating` restore point's reservation to `held` bytes (or, `exactly`, set
    it: its final figure). Commit it before `excess` looks: a check that sees every
    other job's committed reservation is what keeps two jobs from both passing."""
    current = func.coalesce(RestorePoint.quota_bytes, 0)
    value = held if exactly else case((current < held, held), else_=current)
    session.execute(update(RestorePoint).where(
        RestorePoint.id == rp_id, RestorePoint.status == RestorePointStatus.CREATING,
    ).values(quota_bytes=value))


def excess(session: Session, project_id: str) -> str | None:
    """Why the project is over its storage limit now (reservations included), or None."""
    quota = session.get(ProjectQuota, project_id)
    if quota is None or quota.max_bytes is None:
        return None
    used = usage(session, project_id).bytes_stored
    if used <= quota.max_bytes:
        return None
    return _storage_message(project_id, used, quota.max_bytes, 0)


def pass_on(session: Session, rp: RestorePoint) -> None:
    """`rp` is being deleted: the data it added that later restore points of its chain
    still hold stays on the target, so its bytes move to the next one that holds data
    (up to that one's volume size: a restore point holds at most a whole image). The
    newest of a chain hands them back to the one before it instead, once: an RBD backup
    image's head keeps that data until the next backup overwrites it."""
    moving = int(rp.quota_bytes or 0)
    if not moving:
        return
    chain = select(RestorePoint).where(
        RestorePoint.volume_id == rp.volume_id, RestorePoint.target == rp.target,
        RestorePoint.id != rp.id, RestorePoint.status.in_(HOLDING))
    later = session.scalars(chain.where(
        (RestorePoint.created_at > rp.created_at)
        | ((RestorePoint.created_at == rp.created_at) & (RestorePoint.id > rp.id)))
        .order_by(RestorePoint.created_at, RestorePoint.id).limit(1)).first()
    if later is not None:
        held = int(later.quota_bytes or 0) + moving
        later.quota_bytes = min(held, later.size_bytes) if later.size_bytes else held
    else:
        earlier = session.scalars(chain.order_by(RestorePoint.created_at.desc(),
                                                 RestorePoint.id.desc()).limit(1)).first()
        if earlier is None:
            return  # the chain is gone from the target with it
        cap = earlier.size_bytes or moving
        earlier.quota_bytes = int(earlier.quota_bytes or 0) + min(moving, cap)
    rp.quota_bytes = 0
    session.flush()


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
