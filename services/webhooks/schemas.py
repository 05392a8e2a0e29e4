"""The API's view of webhooks and their deliveries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator

from services.formats import PRINTABLE
from services.status import DeliveryStatus
from services.webhooks.events import EVENT_TYPES


def _known(types: list[str] | None) -> list[str] | None:
    if types is None:
        return None
    unknown = sorted(set(types) - set(EVENT_TYPES))
    if unknown:
        raise ValueError(f"unknown event types {unknown}; known: {list(EVENT_TYPES)}")
    if len(set(types)) != len(types):
        raise ValueError("an event type is listed more than once")
    return types


class WebhookCreate(BaseModel):
    url: str = Field(max_length=2048, pattern=PRINTABLE,
                     description="An http(s) URL on a public address")
    event_types: list[str] = Field(default_factory=list, max_length=len(EVENT_TYPES),
                                   description="Events to send; empty: every event")
    description: str | None = Field(default=None, max_length=255, pattern=PRINTABLE)

    _check_types = field_validator("event_types")(_known)


class WebhookUpdate(BaseModel):
    url: str | None = Field(default=None, max_length=2048, pattern=PRINTABLE)
    event_types: list[str] | None = Field(default=None, max_length=len(EVENT_TYPES))
    description: str | None = Field(default=None, max_length=255, pattern=PRINTABLE)
    enabled: bool | None = Field(default=None, description="true enables a disabled webhook "
                                 "again (and forgets its failures)")

    _check_types = field_validator("event_types")(_known)


class WebhookPublic(BaseModel):
    id: str
    project_id: str
    url: str | None = Field(description="The receiver's URL; null for callers who may not "
                                        "read it (readers, by default: a URL often carries a "
                                        "token of the receiver's)")
    url_host: str = Field(description="The URL's scheme, host and port, shown to everyone "
                                      "who sees the webhook: an IP address as it is, a "
                                      "host name by its last two labels "
                                      "(https://*.example.net)")
    description: str | None
    event_types: list[str]
    enabled: bool
    disabled_reason: str | None = Field(description="Why Cairn disabled it, when it did")
    failed_deliveries: int = Field(description="Deliveries in a row that failed for good")
    created_at: datetime
    updated_at: datetime


class WebhookCreated(WebhookPublic):
    secret: str = Field(description="The signing secret (Standard Webhooks, whsec_...); shown "
                                    "now, when rotated, and again only to the same "
                                    "caller's retry of this request with the same "
                                    "Idempotency-Key within 24 h, while the webhook keeps "
                                    "this secret")


class WebhookSecret(BaseModel):
    secret: str = Field(description="The new signing secret")
    previous_expires_at: datetime = Field(description="Until then deliveries carry a "
                                                      "signature with the previous secret too")


class WebhookList(BaseModel):
    webhooks: list[WebhookPublic]


class DeliveryPublic(BaseModel):
    id: str = Field(description="Also the event's id and its webhook-id header")
    event_type: str
    status: DeliveryStatus = Field(description="pending (an attempt is due or in flight), "
                                   "succeeded, or failed for good")
    attempts: int
    next_attempt_at: datetime | None = Field(description="When pending: the next attempt")
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None
    event: dict[str, Any] = Field(description="The CloudEvent sent")


class DeliveryList(BaseModel):
    deliveries: list[DeliveryPublic]
