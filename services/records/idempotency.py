from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from services.base import Base, UTCDateTime


class IdempotentRequest(Base):
    """The first answer to a POST sent with an `Idempotency-Key`, written in the same unit of
    work as what the POST made: a retry replays it instead of making the work twice."""

    __tablename__ = "idempotent_requests"

    project_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    """sha256 of the method, the path and the body (its JSON in canonical form)."""
    status_code: Mapped[int] = mapped_column(Integer)
    response: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
