from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from services.base import ID, Base, UTCDateTime, new_id, utcnow
from services.restore_points.models import RestorePoint
from services.status import JobKind, JobStatus
from services.volumes.models import Volume

_ACTIVE_BACKUP = text("kind = 'backup' AND status IN ('queued', 'running')")


class Job(Base):
    """One unit of work on one volume or restore point: backup, restore or delete."""

    __tablename__ = "jobs"
    __table_args__ = (
        # At most one active backup per volume: a second request (or a racing replica)
        # hits this index instead of writing the same backup image at the same time.
        Index(
            "uq_jobs_active_backup_volume",
            "volume_id",
            unique=True,
            sqlite_where=_ACTIVE_BACKUP,
            postgresql_where=_ACTIVE_BACKUP,
        ),
        Index(None, "status", "queued_at"),
        Index(None, "project_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    project_id: Mapped[str] = mapped_column(String(64))
    kind: Mapped[JobKind] = mapped_column(String(16))
    status: Mapped[JobStatus] = mapped_column(String(16), default=JobStatus.QUEUED)
    volume_id: Mapped[str | None] = mapped_column(ForeignKey("volumes.id"))
    restore_point_id: Mapped[str | None] = mapped_column(ForeignKey("restore_points.id"),
                                                         index=True)
    restore_target: Mapped[str | None] = mapped_column(String(512))
    qos_bytes_per_second: Mapped[int | None] = mapped_column(BigInteger)
    qos_ops_per_second: Mapped[int | None] = mapped_column(Integer)
    cancel_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    bytes_done: Mapped[int] = mapped_column(BigInteger, default=0)
    bytes_total: Mapped[int | None] = mapped_column(BigInteger)
    read_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    write_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    qos_wait_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    engine_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    copy_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    """Wall time of the copy itself (the load shares are fractions of it)."""
    copy_window: Mapped[int | None] = mapped_column(Integer)
    bytes_read: Mapped[int] = mapped_column(BigInteger, default=0)
    bytes_written: Mapped[int] = mapped_column(BigInteger, default=0)
    bytes_resumed: Mapped[int] = mapped_column(BigInteger, default=0)
    """Bytes an earlier attempt had copied, which this attempt resumed after."""
    throughput_bytes_per_second: Mapped[float | None] = mapped_column(Float)
    """Rate over the last progress interval while running; the average once finished."""
    worker: Mapped[str | None] = mapped_column(String(255))
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    queued_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    volume: Mapped[Volume | None] = relationship(lazy="joined")
    restore_point: Mapped[RestorePoint | None] = relationship(lazy="joined")
