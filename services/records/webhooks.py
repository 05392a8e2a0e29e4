"""A project's webhooks, and the outbox of event deliveries (to a webhook, or to the
cloud's notification bus): a delivery row is written in the same transaction as what it
reports (a job's end, a plan's change), so an event is never sent for something that did
not happen, nor lost for something that did."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from services.base import ID, Base, UTCDateTime, new_id, utcnow
from services.status import DeliveryStatus

CURRENT_KEY = "current"
"""The name of `webhook_sealing_key`'s one row."""


class Webhook(Base):
    __tablename__ = "webhooks"

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    project_id: Mapped[str] = mapped_column(String(64), index=True)
    url: Mapped[str] = mapped_column(String(2048))
    description: Mapped[str | None] = mapped_column(String(255))
    event_types: Mapped[str] = mapped_column(Text, default="[]")
    """JSON list of event types (`backup.create.end`...); empty: every event."""
    sealed_secrets: Mapped[str] = mapped_column(Text)
    """A JSON list of {"secret": "whsec_...", "expires_at": ISO or null}, sealed under one
    of the operator's keys for this webhook (`sealed:v1:<key id>:...`,
    `services/webhooks/sealing.py`): every secret not expired signs each delivery, so a
    receiver can switch to a rotated one at its own pace."""
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    failed_deliveries: Mapped[int] = mapped_column(Integer, default=0)
    """Deliveries in a row that failed for good (every attempt); reset by a success."""
    attempt_key: Mapped[str | None] = mapped_column(String(80))
    """`<delivery id>/<attempt>` of the one attempt in flight to this webhook, if any: one
    receiver never has two of Cairn's senders at once (`services/webhooks/delivery.py`)."""
    attempt_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """When that attempt's claim lapses (its worker died): then another may start."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EventDelivery(Base):
    __tablename__ = "event_deliveries"
    __table_args__ = (Index("ix_event_deliveries_due", "status", "next_attempt_at"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    """Also the event's id (`webhook-id`, CloudEvents `id`): receivers deduplicate on it."""
    webhook_id: Mapped[str | None] = mapped_column(
        ForeignKey("webhooks.id", ondelete="CASCADE"), index=True)
    """None: an OpenStack notification (oslo.messaging), not a webhook's."""
    event_type: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)
    """What is sent, so every attempt sends the same: a webhook's CloudEvent, or a
    notification's {"priority", "payload"}."""
    status: Mapped[DeliveryStatus] = mapped_column(String(16), default=DeliveryStatus.PENDING)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """When the scheduler last handed it to a worker (not again while that is recent)."""
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class WebhookSealingKey(Base):
    """The key the deployment's webhook secrets are sealed under, by its id (never the key):
    recorded by the first process that used a key (or by the migration that sealed the
    first secrets, or by `cairn-manage webhooks reseal`), and checked by every process that
    seals or opens one, so two processes with different key files cannot both run
    (`services/webhooks/keys.py`). One row."""

    __tablename__ = "webhook_sealing_key"

    name: Mapped[str] = mapped_column(String(16), primary_key=True, default=CURRENT_KEY)
    key_id: Mapped[str] = mapped_column(String(16))
    recorded_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
