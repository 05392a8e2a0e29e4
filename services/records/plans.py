from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from services.base import ID, Base, UTCDateTime, new_id, utcnow
from services.records.volumes import Volume
from services.status import PlanStatus


class PlanVolume(Base):
    __tablename__ = "plan_volumes"

    plan_id: Mapped[str] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"),
                                         primary_key=True)
    volume_id: Mapped[str] = mapped_column(ForeignKey("volumes.id"), primary_key=True,
                                           index=True)


class Plan(Base):
    """A tenant's protection plan: which volumes, when (rules), where (target), how fast
    (QoS), when not (window) and for how long (retention)."""

    __tablename__ = "plans"
    __table_args__ = (
        UniqueConstraint("project_id", "name"),
        # The scheduler's question: which enabled plans have a slot due?
        Index(None, "status", "next_slot_at"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    project_id: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str | None] = mapped_column(Text)
    target: Mapped[str] = mapped_column(String(64))
    timezone: Mapped[str] = mapped_column(String(64))
    """The zone of the backup window and the retention calendar (days, weeks, months)."""
    rules: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    window_start: Mapped[str | None] = mapped_column(String(5))
    window_end: Mapped[str | None] = mapped_column(String(5))
    retention: Mapped[dict[str, int]] = mapped_column(JSON)
    verify_policy: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """How the plan's restore points are verified (schemas.VerifyPolicy); None: the
    default."""
    qos_bytes_per_second: Mapped[int | None] = mapped_column(BigInteger)
    qos_ops_per_second: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[PlanStatus] = mapped_column(String(16), default=PlanStatus.ENABLED)
    next_slot_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """The earliest slot no job exists for yet; None when the rules have no future slot."""
    last_pruned_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    volumes: Mapped[list[Volume]] = relationship(secondary="plan_volumes", lazy="selectin",
                                                 order_by=Volume.image)
