from __future__ import annotations

from datetime import datetime

from sqlalchemy import LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from services.base import Base, UTCDateTime, utcnow


class ObjectTargetKey(Base):
    """The data key of one object target, as Cairn made it or first found it in the bucket:
    the authority every job checks the bucket's `keys/data-key` against
    (`services/storage/data_keys.py`). One row per target, inserted once (the primary key
    refuses a second: whoever inserts second uses the first), never replaced by Cairn."""

    __tablename__ = "object_target_keys"

    target: Mapped[str] = mapped_column(String(64), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    """`object_keys.fingerprint` of the data key: the same however it is wrapped."""
    wrapped: Mapped[bytes] = mapped_column(LargeBinary)
    """The data key wrapped by the operator's key, as the bucket holds it: the copy of the
    key object an operator puts back when the bucket lost or replaced it. Useless without
    the operator's key. Follows a rewrap under a new operator's key (same fingerprint)."""
    origin: Mapped[str] = mapped_column(String(16))
    """`made` by Cairn for a target that held nothing, or `adopted` from a bucket that held
    its key before Cairn's database recorded keys."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    stored_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """When the bucket was first seen holding this key. From then on a bucket and prefix
    without it are not this target's (or lost it): nothing is written there."""
