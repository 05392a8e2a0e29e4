"""A project's webhooks: the use cases behind /v1/webhooks."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.base import new_id
from services.context import RequestContext
from services.db import Database
from services.errors import Conflict, TooManyWebhooks, WebhookNotFound
from services.records.webhooks import EventDelivery, Webhook
from services.settings import Settings
from services.status import DeliveryStatus
from services.webhooks import addresses, events, keys, secrets
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
    keyring = keys.for_use(session, settings)
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
                   sealed_secrets=keyring.seal(hook_id, stored), enabled=True,
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
    hook = get(session, ctx, webhook_id)
    keyring = keys.for_use(session, settings)
    overlap = timedelta(hours=settings.webhook_secret_overlap_hours)
    stored, secret = secrets.rotate(keyring.open(hook.id, hook.sealed_secrets), now, overlap)
    hook.sealed_secrets = keyring.seal(hook.id, stored)
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
                          next_attempt_at=(row.next_attempt_at
                                           if row.status == DeliveryStatus.PENDING else None),
                          last_status_code=row.last_status_code, last_error=row.last_error,
                          created_at=row.created_at, delivered_at=row.delivered_at,
                          event=json.loads(row.body))


def kept_answer(ctx: RequestContext, answer: dict[str, Any]) -> dict[str, Any]:
    """A creation's answer as its Idempotency-Key keeps it for replays: not the secret, but
    its digest (the secret is 192 random bits: the digest gives nothing away) and who
    asked, so a replay can be answered only to that caller, and only while the webhook
    still has that secret."""
    kept = {key: value for key, value in answer.items() if key != "secret"}
    return {**kept, "secret_sha256": _digest(answer["secret"]), "created_by": ctx.user_id}


def replayed_answer(db: Database, ctx: RequestContext, settings: Settings,
                    kept: dict[str, Any]) -> dict[str, Any]:
    """The first answer again, for a retry with the same key, the secret included (a client
    whose first answer was lost needs it): only to the user who asked first, and only
    while the webhook exists and its current secret is still the one that answer gave.
    Anyone else, or a replay after a delete or rotation, is 409."""
    if "secret_sha256" not in kept:
        raise Conflict(f"the first answer to this Idempotency-Key (webhook {kept.get('id')}) "
                       "was kept by an earlier Cairn that replays no secret any more: rotate "
                       "the webhook's secret to get a new one", webhook_id=kept.get("id"))
    if kept.get("created_by") != ctx.user_id:
        raise Conflict("this Idempotency-Key was used by another caller of the project to "
                       "create a webhook; use a key of your own", webhook_id=kept.get("id"))
    with db.session() as session:
        hook = session.get(Webhook, kept["id"])
        if hook is None or hook.project_id != ctx.project_id:
            raise Conflict(f"webhook {kept['id']}, which this request created, was deleted "
                           "since: its secret is not shown again", webhook_id=kept["id"])
        keyring = keys.for_use(session, settings)
        current = secrets.current_secret(keyring.open(hook.id, hook.sealed_secrets))
    if not hmac.compare_digest(_digest(current), str(kept["secret_sha256"])):
        raise Conflict(f"webhook {kept['id']}, which this request created, has had its "
                       "secret rotated since: the first secret is not shown again (the "
                       "rotation's answer holds the current one)", webhook_id=kept["id"])
    answer = {key: value for key, value in kept.items()
              if key not in ("secret_sha256", "created_by")}
    return {**answer, "secret": current}


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
