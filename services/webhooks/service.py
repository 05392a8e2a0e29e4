"""A project's webhooks: the use cases behind /v1/webhooks."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.base import new_id
from services.context import RequestContext
from services.errors import TooManyWebhooks, WebhookNotFound
from services.records.webhooks import EventDelivery, Webhook
from services.settings import Settings
from services.webhooks import addresses, events, sealing, secrets
from services.webhooks.schemas import (
    DeliveryPublic,
    WebhookCreate,
    WebhookCreated,
    WebhookPublic,
    WebhookSecret,
    WebhookUpdate,
)

MAX_PER_PROJECT = 10


def public(hook: Webhook, show_url: bool) -> WebhookPublic:
    """The webhook as the caller may see it: its URL only with `webhook:get_url`."""
    return WebhookPublic(id=hook.id, project_id=hook.project_id,
                         url=hook.url if show_url else None,
                         url_host=addresses.shown_host(hook.url),
                         description=hook.description,
                         event_types=json.loads(hook.event_types), enabled=hook.enabled,
                         disabled_reason=hook.disabled_reason,
                         failed_deliveries=hook.failed_deliveries,
                         created_at=hook.created_at, updated_at=hook.updated_at)


def create(session: Session, ctx: RequestContext, settings: Settings, body: WebhookCreate,
           now: datetime, show_url: bool) -> WebhookCreated:
    seal = sealing.required(settings)
    _check_url(settings, body.url)
    count = session.scalar(select(func.count()).select_from(Webhook)
                           .where(Webhook.project_id == ctx.project_id)) or 0
    if count >= MAX_PER_PROJECT:
        raise TooManyWebhooks(f"a project has at most {MAX_PER_PROJECT} webhooks; delete one "
                            "first (a webhook can listen to several event types)")
    stored, secret = secrets.first()
    hook_id = new_id()
    hook = Webhook(id=hook_id, project_id=ctx.project_id, url=body.url,
                   description=body.description, event_types=json.dumps(body.event_types),
                   sealed_secrets=seal.seal(hook_id, stored), enabled=True,
                   failed_deliveries=0, created_at=now, updated_at=now)
    session.add(hook)
    session.flush()
    return WebhookCreated(**public(hook, show_url).model_dump(), secret=secret)


def get(session: Session, ctx: RequestContext, webhook_id: str) -> Webhook:
    hook = session.get(Webhook, webhook_id)
    if hook is None or hook.project_id != ctx.project_id:
        raise WebhookNotFound(f"webhook {webhook_id} not found in project {ctx.project_id}")
    return hook


def listed(session: Session, ctx: RequestContext, show_url: bool) -> list[WebhookPublic]:
    return [public(hook, show_url) for hook in session.scalars(
        select(Webhook).where(Webhook.project_id == ctx.project_id)
        .order_by(Webhook.created_at, Webhook.id))]


def update(session: Session, ctx: RequestContext, settings: Settings, webhook_id: str,
           body: WebhookUpdate, now: datetime, show_url: bool) -> WebhookPublic:
    hook = get(session, ctx, webhook_id)
    if body.url is not None:
        _check_url(settings, body.url)
        hook.url = body.url
    if body.event_types is not None:
        hook.event_types = json.dumps(body.event_types)
    if "description" in body.model_fields_set:
        hook.description = body.description
    if body.enabled is not None:
        if body.enabled and not hook.enabled:
            hook.failed_deliveries, hook.disabled_reason = 0, None
        hook.enabled = body.enabled
    hook.updated_at = now
    session.flush()
    return public(hook, show_url)


def _check_url(settings: Settings, url: str) -> None:
    addresses.check_url(url, settings.webhook_allowed_networks,
                        refused_networks=settings.webhook_refused_networks)


def delete(session: Session, ctx: RequestContext, webhook_id: str) -> None:
    session.delete(get(session, ctx, webhook_id))
    session.flush()


def rotate(session: Session, ctx: RequestContext, settings: Settings, webhook_id: str,
           now: datetime) -> WebhookSecret:
    seal = sealing.required(settings)
    hook = get(session, ctx, webhook_id)
    overlap = timedelta(hours=settings.webhook_secret_overlap_hours)
    stored, secret = secrets.rotate(seal.open(hook.id, hook.sealed_secrets), now, overlap)
    hook.sealed_secrets = seal.seal(hook.id, stored)
    hook.updated_at = now
    return WebhookSecret(secret=secret, previous_expires_at=now + overlap)


def send_test(session: Session, ctx: RequestContext, webhook_id: str,
              now: datetime) -> DeliveryPublic:
    """A `webhook.test` event for this webhook alone, even a disabled one (to check a
    receiver before enabling it again)."""
    hook = get(session, ctx, webhook_id)
    [row] = events.record(session, ctx.project_id, "webhook.test", subject=None,
                          webhook_id=hook.id, now=now,
                          data={"webhook_id": hook.id, "message": "a test event from Cairn"})
    session.flush()
    return delivery_public(row)


def deliveries(session: Session, ctx: RequestContext, webhook_id: str,
               limit: int) -> list[DeliveryPublic]:
    hook = get(session, ctx, webhook_id)
    return [delivery_public(row) for row in session.scalars(
        select(EventDelivery).where(EventDelivery.webhook_id == hook.id)
        .order_by(EventDelivery.created_at.desc(), EventDelivery.id).limit(limit))]


def delivery_public(row: EventDelivery) -> DeliveryPublic:
    return DeliveryPublic(id=row.id, event_type=row.event_type, status=row.status,
                          attempts=row.attempts,
                          next_attempt_at=row.next_attempt_at if row.status == "pending"
                          else None,
                          last_status_code=row.last_status_code, last_error=row.last_error,
                          created_at=row.created_at, delivered_at=row.delivered_at,
                          event=json.loads(row.body))


def kept_answer(settings: Settings, answer: dict[str, Any]) -> dict[str, Any]:
    """A creation's answer as its Idempotency-Key keeps it for replays: the secret sealed."""
    seal = sealing.required(settings)
    return {**answer, "secret": seal.seal(answer["id"], answer["secret"],
                                          sealing.CREATED_ANSWER)}


def replayed_answer(settings: Settings, kept: dict[str, Any]) -> dict[str, Any]:
    """The first answer again, for a retry with the same key, the secret included: the
    caller may create webhooks in the project (the policy was checked), so it could rotate
    the secret anyway, and a client whose first answer was lost needs the secret."""
    seal = sealing.required(settings)
    return {**kept, "secret": seal.open(kept["id"], kept["secret"], sealing.CREATED_ANSWER)}
