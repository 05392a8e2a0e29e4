from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from services.base import Base, UTCDateTime, utcnow


class ProjectQuota(Base):
    """A project's limits; a missing row or a None limit means unlimited."""

    __tablename__ = "project_quotas"

    project_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    restore_points: Mapped[int | None] = mapped_column(BigInteger)
    max_bytes: Mapped[int | None] = mapped_column(BigInteger)
    """The storage limit in bytes (the API speaks GiB, fractions allowed)."""
    gigabytes: Mapped[int | None] = mapped_column(BigInteger)
    """The limit as the release before read it: `max_bytes` in whole GiB, rounded up. Kept
    in step for one release, so processes of that release (a rolling upgrade, a rollback)
    enforce the same limit; dropped in the next."""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
