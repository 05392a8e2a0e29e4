from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from sqlalchemy import JSON, BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Mapped, mapped_column, relationship, validates
from sqlalchemy.types import TypeDecorator

from services.base import ID, Base, UTCDateTime, new_id, utcnow
from services.formats import FreeText
from services.records.volumes import Volume
from services.status import Consistency, PlanStatus, RestorePointKind


class StoredRule(BaseModel):
    """A schedule rule as saved, after the checks of `plans.service` (a cron or an RRULE;
    an RRULE's start pinned to the day it was saved)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: RestorePointKind = RestorePointKind.INCREMENTAL
    cron: str | None = None
    rrule: str | None = None
    timezone: str | None = None
    """IANA zone; the plan's when None."""
    start: datetime | None = None
    """RRULE's DTSTART on the rule's wall clock (naive)."""


class Retention(BaseModel):
    """Keep the `keep_last` newest restore points plus, per calendar period in the plan's
    timezone, the newest restore point of each of the last `daily` days, `weekly` ISO weeks,
    `monthly` months and `yearly` years that have one. All zero: keep everything."""

    keep_last: int = Field(default=0, ge=0, le=10000)
    daily: int = Field(default=0, ge=0, le=10000)
    weekly: int = Field(default=0, ge=0, le=10000)
    monthly: int = Field(default=0, ge=0, le=10000)
    yearly: int = Field(default=0, ge=0, le=1000)


class VerifyPolicy(BaseModel):
    """How the plan's restore points are verified after they are made: a sampled verify
    (a fraction of the objects, drawn anew each time) every `sampled_every_days`, and a full
    one every `full_every_days`, counted from the restore point's completion or its last
    verify of that kind. null turns either off."""

    sampled_every_days: float | None = Field(default=7, gt=0, le=3660)
    sample_fraction: float = Field(default=0.05, gt=0, le=1,
                                   description="Fraction of the objects a sampled verify reads")
    full_every_days: float | None = Field(default=30, gt=0, le=3660)


class CopyPolicy(BaseModel):
    """Off-site copies of the plan's restore points: after a backup, its restore point is
    copied from the backup pool to `target` (an object target) unless the volume already
    has a copy there from the same period (`every`, in the plan's timezone)."""

    target: FreeText = Field(min_length=1, max_length=64, examples=["s3"],
                        description="The object target the copies go to")
    every: Literal["backup", "day", "week", "month"] = Field(
        default="week", description="Copy the first restore point of each day, ISO week or "
                                    "month, or every one (`backup`)")
    retention: Retention | None = Field(
        default=None, description="How long the copies are kept; the plan's retention when "
                                  "null")


class ModelJSON(TypeDecorator[Any]):
    """A JSON column holding typed values: validated when written and when read, so code
    gets the model, never a dict to pick apart."""

    impl = JSON
    cache_ok = True

    def __init__(self, of: Any, exclude_none: bool = False) -> None:
        super().__init__()
        self.of = of
        self.exclude_none = exclude_none
        self._adapter: TypeAdapter[Any] = TypeAdapter(of)

    def coerce(self, value: Any) -> Any:
        return None if value is None else self._adapter.validate_python(value)

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        return self._adapter.dump_python(self.coerce(value), mode="json",
                                         exclude_none=self.exclude_none)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return self.coerce(value)


RULES = ModelJSON(list[StoredRule], exclude_none=True)
RETENTION = ModelJSON(Retention)
VERIFY_POLICY = ModelJSON(VerifyPolicy)
COPY_POLICY = ModelJSON(CopyPolicy)
_TYPED_COLUMNS = {"rules": RULES, "retention": RETENTION, "verify_policy": VERIFY_POLICY,
                  "copy_policy": COPY_POLICY}


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
    rules: Mapped[list[StoredRule]] = mapped_column(RULES)
    window_start: Mapped[str | None] = mapped_column(String(5))
    window_end: Mapped[str | None] = mapped_column(String(5))
    retention: Mapped[Retention] = mapped_column(RETENTION)
    verify_policy: Mapped[VerifyPolicy | None] = mapped_column(VERIFY_POLICY)
    """How the plan's restore points are verified; None: the default."""
    copy_policy: Mapped[CopyPolicy | None] = mapped_column(COPY_POLICY)
    """Off-site copies of its restore points; None: none."""
    qos_bytes_per_second: Mapped[int | None] = mapped_column(BigInteger)
    qos_ops_per_second: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[PlanStatus] = mapped_column(String(16), default=PlanStatus.ENABLED)
    consistency: Mapped[Consistency] = mapped_column(
        String(16), default=Consistency.VOLUME, server_default=Consistency.VOLUME.value)
    cinder_group_id: Mapped[str | None] = mapped_column(String(36), index=True)
    """The Cinder generic volume group whose volumes the plan protects (kept in step by
    the scheduler, `services/plans/cinder_groups.py`); None: the volumes as given."""
    next_slot_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """The earliest slot no job exists for yet; None when the rules have no future slot."""
    last_pruned_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    volumes: Mapped[list[Volume]] = relationship(secondary="plan_volumes", lazy="selectin",
                                                 order_by=Volume.image)

    @validates("rules", "retention", "verify_policy", "copy_policy")
    def _typed(self, key: str, value: Any) -> Any:
        # Typed as soon as assigned, not only once written and read back.
        return _TYPED_COLUMNS[key].coerce(value)
