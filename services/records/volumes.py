from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from services.base import ID, Base, UTCDateTime, new_id, utcnow


class Volume(Base):
    """A source volume a project protects: a Cinder volume's RBD image, or an RBD image an
    administrator named as cluster/pool/image.
    Its id names the backup image (`cairn.vol.<id>`) in every target pool."""

    __tablename__ = "volumes"
    __table_args__ = (UniqueConstraint("project_id", "cluster", "pool", "image"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    project_id: Mapped[str] = mapped_column(String(64), index=True)
    cluster: Mapped[str] = mapped_column(String(64))
    pool: Mapped[str] = mapped_column(String(128))
    image: Mapped[str] = mapped_column(String(255))
    cinder_volume_id: Mapped[str | None] = mapped_column(String(36), index=True)
    """The Cinder volume whose RBD image this is, when it is one."""
    name: Mapped[str | None] = mapped_column(String(255))
    """The Cinder volume's name as Cairn last learnt it (each time a backup or a plan names
    the volume); None for an RBD image, or a Cinder volume without a name."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    @property
    def ref(self) -> str:
        return f"{self.cluster}/{self.pool}/{self.image}"

    @property
    def public_name(self) -> str:
        """What the tenant calls the volume: its Cinder id, else its RBD image."""
        return self.cinder_volume_id or self.ref


VOLUME_REF = (Volume.cluster + "/" + Volume.pool + "/" + Volume.image).label("volume_ref")
"""`cluster/pool/image` in SQL, for list pages read as rows (Volume.ref on an object)."""
VOLUME_NAME = Volume.name.label("volume_name")
"""Its Cinder name, for the same rows."""


class VolumeLock(Base):
    """Held by the one backup or prune working on a volume, so a prune never deletes what a
    running incremental builds on. The primary key makes a second holder impossible: an
    IntegrityError means "taken"."""

    __tablename__ = "volume_locks"

    volume_id: Mapped[str] = mapped_column(ForeignKey("volumes.id", ondelete="CASCADE"),
                                           primary_key=True)
    job_id: Mapped[str] = mapped_column(ID)
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
