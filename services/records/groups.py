from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from services.base import ID, Base, UTCDateTime, new_id, utcnow


class RestorePointGroup(Base):
    """One run of a plan with `consistency: group`: one RBD group snapshot over the run's
    volumes, and the restore points made from it (`RestorePoint.group_id`), which hold
    the volumes at the same instant. The group snapshot is named `cairn.<id>` on the RBD
    group `cairn.plan.<plan_id>`: both lead back to their rows."""

    __tablename__ = "restore_point_groups"

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    project_id: Mapped[str] = mapped_column(String(64), index=True)
    plan_id: Mapped[str] = mapped_column(String(36), index=True)
    """Not a foreign key: the history outlives the plan."""
    slot_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    claimed_by: Mapped[str | None] = mapped_column(String(36))
    """The job whose worker takes the group snapshot (the run's first to start)."""
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    taken_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """When the group snapshot was taken: the instant every member restore point holds."""
    rbd_group: Mapped[str | None] = mapped_column(String(512))
    """cluster/pool/group of the RBD group the snapshot was taken on."""
    released_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """When the group snapshot was removed from the volumes (every member was copied)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


def group_name(plan_id: str) -> str:
    return f"cairn.plan.{plan_id}"


def group_snapshot_name(group_id: str) -> str:
    return f"cairn.{group_id}"
