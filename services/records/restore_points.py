from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Float,
    ForeignKey,
    Index,
    String,
    Text,
    or_,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from services.base import ID, Base, UTCDateTime, new_id, utcnow
from services.records.volumes import Volume
from services.status import RestorePointKind, RestorePointStatus, VerifyStatus


def snapshot_name(restore_point_id: str) -> str:
    """The name of the source and backup snapshots of a restore point."""
    return f"cairn.{restore_point_id}"


SNAPSHOT = re.compile(r"^cairn\.([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")
"""A restore point's snapshot (`snapshot_name`), of the backup image and of the source
volume alike; its group is the restore point's id."""


def backup_image_name(volume_id: str) -> str:
    """The backup image holding every restore point of a volume in one target pool."""
    return f"cairn.vol.{volume_id}"


def checkpoint_object_name(restore_point_id: str) -> str:
    """The RADOS object (in the target pool) holding a running backup's checkpoint."""
    return f"cairn.checkpoint.{restore_point_id}"


def manifest_object_name(restore_point_id: str) -> str:
    """The RADOS object (in the target pool) holding a restore point's checksums."""
    return f"cairn.manifest.{restore_point_id}"


OWNER_XATTR = "cairn.volume_id"
"""On a manifest's head and a checkpoint: the volume row the object belongs to, so the orphan
reconciler tells this installation's leftovers from another's in a shared pool (the names
carry the restore point's id, which another installation's database does not know)."""


class RestorePoint(Base):
    """One point-in-time copy of one volume: a snapshot of the volume's backup image."""

    __tablename__ = "restore_points"
    # A volume's restore points newest first: its page of the list, and its newest one in
    # the volume list (one index probe per volume, not a scan of its thousands).
    __table_args__ = (Index(None, "project_id", "created_at", "id"),
                      Index(None, "volume_id", "created_at", "id"))

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    project_id: Mapped[str] = mapped_column(String(64))
    volume_id: Mapped[str] = mapped_column(ForeignKey("volumes.id"))
    target: Mapped[str] = mapped_column(String(64))
    kind: Mapped[RestorePointKind] = mapped_column(String(16), default=RestorePointKind.FULL)
    status: Mapped[RestorePointStatus] = mapped_column(
        String(16), default=RestorePointStatus.CREATING
    )
    status_reason: Mapped[str | None] = mapped_column(Text)
    base_restore_point_id: Mapped[str | None] = mapped_column(String(36))
    """The restore point an incremental was built on (not a foreign key: the base may be
    deleted later without touching this one, which is a complete image of its own)."""
    full_reason: Mapped[str | None] = mapped_column(Text)
    """Why an incremental request became a full copy."""
    bytes_read: Mapped[int | None] = mapped_column(BigInteger)
    source_bootable: Mapped[bool | None] = mapped_column(Boolean)
    """Whether the Cinder volume was bootable when it was backed up (None: not a Cinder
    volume, or Cinder could not tell); a restore into Cinder makes its volume bootable."""
    size_bytes: Mapped[int | None] = mapped_column(BigInteger)
    bytes_copied: Mapped[int | None] = mapped_column(BigInteger)
    quota_bytes: Mapped[int | None] = mapped_column(BigInteger)
    """What it counts against its project's storage quota (`services/quotas/chains.py`):
    while `creating`, the room it reserved (raised as it writes); once committed, what it
    holds on its target that `quota_basis_id` does not; 0 once it holds nothing."""
    added_bytes: Mapped[int | None] = mapped_column(BigInteger)
    """What it held beyond its chain's previous restore point when it was committed; never
    changed after. The next backup of its volume to its target reserves about as much.
    NULL on a committed restore point: not measured yet (made before this was kept)."""
    quota_basis_id: Mapped[str | None] = mapped_column(String(36))
    """The restore point of its chain (same volume, same target) that `quota_bytes` is
    counted beyond: the previous one still held when it was measured; NULL for the first
    (it counts all its data)."""
    duration_seconds: Mapped[float | None] = mapped_column(Float)
    checksum_algorithm: Mapped[str | None] = mapped_column(String(32))
    key_fingerprint: Mapped[str | None] = mapped_column(String(64))
    """On an object target: the fingerprint of the data key it was sealed with, recorded
    at commit (`services/storage/object_keys.fingerprint`), so a key replaced since is
    told apart from corruption. None on RBD targets, and on restore points made before
    Cairn recorded it until a job reads their manifest with the target's key."""
    objects_checksummed: Mapped[int | None] = mapped_column(BigInteger)
    verified_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    verify_status: Mapped[VerifyStatus | None] = mapped_column(String(16))
    corrupt_object_count: Mapped[int | None] = mapped_column(BigInteger)
    verify_mode: Mapped[str | None] = mapped_column(String(16))
    """How the last verify read it: `full`, or `sampled` (a random fraction of objects)."""
    verified_full_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """When a verify last read every object."""
    corrupt_objects: Mapped[str | None] = mapped_column(Text)
    """JSON list of the first corrupt object indexes found by the last verify."""
    plan_id: Mapped[str | None] = mapped_column(String(36), index=True)
    copied_from_restore_point_id: Mapped[str | None] = mapped_column(String(36), index=True)
    """The restore point (on an RBD target) this one is a copy of, made by a copy job from
    the backup pool: it holds the volume at that restore point's instant."""
    group_id: Mapped[str | None] = mapped_column(String(36), index=True)
    """The group restore point (a plan's run with `consistency: group`) it belongs to."""
    """The plan whose job made it; its retention applies. None for on-demand backups,
    which stay until deleted."""
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """No prune deletes it before this time."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    volume: Mapped[Volume] = relationship(lazy="joined")

    @property
    def snapshot(self) -> str:
        return snapshot_name(self.id)

    @property
    def backup_image(self) -> str:
        return backup_image_name(self.volume_id)

    @property
    def manifest_object(self) -> str:
        return manifest_object_name(self.id)

    @property
    def checkpoint_object(self) -> str:
        return checkpoint_object_name(self.id)


def unlocked(now: datetime) -> ColumnElement[bool]:
    """SQL: the restore point has no lock in force at `now`."""
    return or_(RestorePoint.locked_until.is_(None), RestorePoint.locked_until <= now)
