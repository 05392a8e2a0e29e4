from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from services.base import ID, Base, UTCDateTime, new_id, utcnow
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import JobKind, JobStatus, RestoreMethod, RestoreMode, RestorePointKind

_ACTIVE_BACKUP = text("kind = 'backup' AND status IN ('queued', 'running')")
_QUEUED_PRUNE = text("kind = 'prune' AND status = 'queued'")


class Job(Base):
    """One unit of work on one volume, restore point or plan: backup, restore, delete,
    verify or prune."""

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
        # A plan's slot runs once per volume, however many scheduler replicas race for it.
        UniqueConstraint("plan_id", "volume_id", "slot_at"),
        # At most one prune per plan waits: "prune after each backup" never piles them up,
        # and a backup ending while a prune runs (which skipped its busy volume) still gets
        # a prune after it.
        Index(
            "uq_jobs_queued_prune_plan",
            "plan_id",
            unique=True,
            sqlite_where=_QUEUED_PRUNE,
            postgresql_where=_QUEUED_PRUNE,
        ),
        Index(None, "status", "sent_at", "not_before"),
        Index(None, "project_id", "created_at", "id"),
        Index(None, "plan_id", "created_at"),
        Index(None, "volume_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    project_id: Mapped[str] = mapped_column(String(64))
    kind: Mapped[JobKind] = mapped_column(String(16))
    status: Mapped[JobStatus] = mapped_column(String(16), default=JobStatus.QUEUED)
    volume_id: Mapped[str | None] = mapped_column(ForeignKey("volumes.id"))
    restore_point_id: Mapped[str | None] = mapped_column(ForeignKey("restore_points.id"),
                                                         index=True)
    restore_target: Mapped[str | None] = mapped_column(String(512))
    restore_mode: Mapped[RestoreMode | None] = mapped_column(String(16))
    """How a restore writes `restore_target`: a new RBD image (None), a new Cinder volume
    Cairn created, or an existing Cinder volume in place."""
    restore_cinder_volume_id: Mapped[str | None] = mapped_column(String(36))
    restore_method: Mapped[RestoreMethod] = mapped_column(
        String(16), default=RestoreMethod.COPY, server_default=RestoreMethod.COPY.value)
    """`instant`: the restore clones the backup snapshot, hands the volume over
    (`ready_at`), then flattens it; until then the restore point cannot be deleted."""
    restore_volume_spec: Mapped[str | None] = mapped_column(Text)
    """JSON of the request's `new_volume` for an instant restore: the worker has Cinder
    adopt the clone under this name, type and size (a copy restore creates the volume
    while the user waits instead)."""
    target: Mapped[str | None] = mapped_column(String(64))
    """The backup target the job writes (backup) or reads (restore, verify): its
    concurrency limit applies."""
    backup_kind: Mapped[RestorePointKind | None] = mapped_column(String(16))
    """For a scheduled backup, the kind its restore point is made as (the restore point
    itself is created when the job starts, so a job waiting for its window or a free slot
    holds no half-made restore point)."""
    plan_id: Mapped[str | None] = mapped_column(String(36))
    """The plan that made the job (not a foreign key: the history outlives the plan)."""
    slot_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    group_id: Mapped[str | None] = mapped_column(String(36), index=True)
    """A backup of a group run: its source is the run's RBD group snapshot
    (`RestorePointGroup`), and its restore point joins that group."""
    """The scheduled slot this job runs; None for on-demand jobs."""
    not_before: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """The job is not started earlier (its slot, or the opening of its plan's window)."""
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """When the job got its concurrency slots and was sent to the broker; None while it
    waits for them."""
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
    rate_bytes_per_second: Mapped[float | None] = mapped_column(Float)
    """The copy's rate over the last progress interval while it runs; its average once
    finished."""
    worker: Mapped[str | None] = mapped_column(String(255))
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    summary: Mapped[str | None] = mapped_column(Text)
    """What a finished job did, in words (`JobOut.summary`)."""
    warnings: Mapped[str | None] = mapped_column(Text)
    """JSON list: steps after the job's commit point that failed and were left (a source
    snapshot that could not be removed); the job still succeeded."""
    verify_fraction: Mapped[float | None] = mapped_column(Float)
    """A verify that reads this fraction of the objects, chosen at random; None: all."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    queued_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ready_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """When a restore's volume became usable: at the end of a copy, before the flatten of
    an instant restore. The instant restore's commit point: never undone after it."""
    phase_seconds: Mapped[str | None] = mapped_column(Text)
    """JSON object: seconds each phase of the job took (queue wait, claim, open, ...)."""

    volume: Mapped[Volume | None] = relationship(lazy="joined")
    restore_point: Mapped[RestorePoint | None] = relationship(lazy="joined")
