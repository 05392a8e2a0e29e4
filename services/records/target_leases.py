from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, String
from sqlalchemy.orm import Mapped, mapped_column

from services.base import ID, Base, UTCDateTime, new_id, utcnow


class TargetLeaseGate(Base):
    """One row per object target. Every lease change of the target first updates this row,
    which serializes them (a row lock on PostgreSQL, the write lock on SQLite): a sweep and
    a backup cannot both see the other absent."""

    __tablename__ = "target_lease_gates"

    target: Mapped[str] = mapped_column(String(64), primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger, default=0)
    sweeps: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    """Exclusive leases ever acquired on the target (garbage collections' sweeps): a count
    equal to one read under an earlier lease means no chunk was swept since."""


class TargetLease(Base):
    """A hold on an object target: shared by each backup from its first chunk lookup to its
    manifest, exclusive by a garbage collection's sweep (ADR 0007). A lease not renewed by
    `expires_at` is void: its holder died or stalled."""

    __tablename__ = "target_leases"

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    target: Mapped[str] = mapped_column(String(64), index=True)
    holder: Mapped[str] = mapped_column(String(128))
    """The job id of a backup, or `gc:<worker>` for a sweep."""
    exclusive: Mapped[bool] = mapped_column(Boolean, default=False)
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
