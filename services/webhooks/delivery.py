"""Delivering a webhook event: one attempt per call, by a worker. The delivery row is the
outbox entry; an attempt claims it (attempts + 1, and its next attempt pushed past the
attempt's own timeout, so a worker that dies mid-attempt leaves it to a later one), posts
the CloudEvent signed for every active secret (`transport`: to the address it checked),
and records the answer. Failures are retried with exponential backoff; after
`webhook_max_attempts` the delivery fails for good, and after
`webhook_disable_after_failures` such deliveries in a row the webhook is disabled with the
reason. Deliveries are at least once: receivers deduplicate on `webhook-id`.

The delivery log shows the tenant what happened as a category ("connection refused",
"timeout", "HTTP 500"), never the receiver's answer or the error's text: an allowed
internal receiver's reply, its address or a resolver's message is not the tenant's to
read. The operator's log has the detail."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from services.base import utcnow
from services.db import Database
from services.dispatch import Dispatcher
from services.errors import InvalidInput
from services.records.webhooks import EventDelivery, Webhook
from services.settings import Settings
from services.webhooks import openstack, signing, transport
from services.webhooks.secrets import active_secrets

log = logging.getLogger(__name__)

RESEND_AFTER = timedelta(seconds=60)
"""A delivery handed to a worker is not handed again before this (its broker message may
still be queued); one whose worker died is picked up again after it."""


@dataclass(frozen=True)
class Attempt:
    delivery_id: str
    number: int
    event_type: str
    body: bytes
    url: str | None
    """None: an OpenStack notification."""
    secrets: list[str]


def dispatch_due(db: Database, dispatcher: Dispatcher, now: datetime,
                 limit: int = 500) -> int:
    """cairn-scheduler's step: hand the due deliveries to the workers."""
    with db.session() as session:
        due = list(session.scalars(
            select(EventDelivery.id)
            .where(EventDelivery.status == "pending", EventDelivery.next_attempt_at <= now,
                   (EventDelivery.sent_at.is_(None))
                   | (EventDelivery.sent_at <= now - RESEND_AFTER))
            .order_by(EventDelivery.next_attempt_at).limit(limit)))
        if not due:
            return 0
        session.execute(update(EventDelivery).where(EventDelivery.id.in_(due))
                        .values(sent_at=now))
    return len(dispatcher.send_deliveries(due))


def purge(db: Database, before: datetime) -> int:
    """Forget deliveries that ended (succeeded or failed for good) before `before`: the
    delivery log keeps `event_delivery_log_days`, the outbox only what is still due."""
    with db.session() as session:
        result = session.execute(
            delete(EventDelivery).where(EventDelivery.status != "pending",
                                        EventDelivery.created_at < before))
        return int(getattr(result, "rowcount", 0) or 0)


def deliver(db: Database, settings: Settings, delivery_id: str) -> None:
    attempt = _claim(db, settings, delivery_id)
    if attempt is None:
        return
    if attempt.url is None:
        _record(db, settings, attempt, None, _notify(settings, attempt))
        return
    try:
        code, error = _post(settings, attempt)
    except Exception:
        log.exception("webhook delivery %s attempt %d failed inside Cairn",
                      attempt.delivery_id, attempt.number)
        code = None
        error = "Cairn could not send this event (an internal error; the operator's log has it)"
    _record(db, settings, attempt, code, error)


def _post(settings: Settings, attempt: Attempt) -> tuple[int | None, str | None]:
    """The answer's status and the tenant's view of what went wrong (None: delivered)."""
    assert attempt.url is not None
    try:
        code = transport.post(
            attempt.url, attempt.body,
            {"content-type": "application/cloudevents+json",
             **signing.headers(attempt.secrets, attempt.delivery_id, int(time.time()),
                               attempt.body)},
            allowed=settings.webhook_allowed_networks, seconds=settings.webhook_timeout_seconds,
            proxy=settings.webhook_proxy_url)
    except InvalidInput as exc:
        log.info("webhook delivery %s attempt %d refused: %s", attempt.delivery_id,
                 attempt.number, exc)
        return None, exc.message.removeprefix("url: ")
    except transport.AttemptFailed as exc:
        log.info("webhook delivery %s attempt %d to %s failed: %s", attempt.delivery_id,
                 attempt.number, attempt.url, exc.detail)
        return None, exc.category
    if 200 <= code < 300:
        return code, None
    if 300 <= code < 400:
        return code, f"HTTP {code} (redirects are not followed)"
    return code, f"HTTP {code}"


def _claim(db: Database, settings: Settings, delivery_id: str) -> Attempt | None:
    now = utcnow()
    hold = timedelta(seconds=settings.webhook_timeout_seconds) + RESEND_AFTER
    with db.session() as session:
        claimed = session.execute(
            update(EventDelivery)
            .where(EventDelivery.id == delivery_id, EventDelivery.status == "pending",
                   EventDelivery.next_attempt_at <= now)
            .values(attempts=EventDelivery.attempts + 1, next_attempt_at=now + hold))
        if getattr(claimed, "rowcount", 0) != 1:
            return None  # delivered, failed for good, or another attempt holds it
        row = session.get(EventDelivery, delivery_id)
        assert row is not None
        if row.webhook_id is None:
            return Attempt(row.id, row.attempts, row.event_type, row.body.encode(), None, [])
        hook = session.get(Webhook, row.webhook_id)
        if hook is None or (not hook.enabled and row.event_type != "webhook.test"):
            row.status = "failed"
            row.last_error = "the webhook was disabled before this event went out"
            return None
        return Attempt(row.id, row.attempts, row.event_type, row.body.encode(), hook.url,
                       active_secrets(hook.secrets, now))


def _notify(settings: Settings, attempt: Attempt) -> str | None:
    """Send an OpenStack notification; the error, if any."""
    if not openstack.enabled(settings):
        return "OpenStack notifications were turned off (CAIRN_NOTIFICATION_DRIVER=noop)"
    message = json.loads(attempt.body)
    try:
        openstack.send(settings, attempt.event_type, message["priority"], message["payload"])
    except Exception as exc:  # oslo.messaging raises for a bad URL or configuration
        return f"{type(exc).__name__}: {exc}"[:500]
    return None


def _record(db: Database, settings: Settings, attempt: Attempt, code: int | None,
            error: str | None) -> None:
    now = utcnow()
    with db.session() as session:
        row = session.get(EventDelivery, attempt.delivery_id)
        if row is None or row.attempts != attempt.number or row.status != "pending":
            return  # deleted with its webhook, or a later attempt owns it
        row.last_status_code, row.last_error = code, error
        hook = session.get(Webhook, row.webhook_id)
        if error is None:
            row.status, row.delivered_at = "succeeded", now
            if hook is not None:
                hook.failed_deliveries = 0
            return
        log.info("webhook delivery %s attempt %d failed: %s", row.id, row.attempts, error)
        if row.attempts < settings.webhook_max_attempts:
            backoff = settings.webhook_retry_base_seconds * 2 ** (row.attempts - 1)
            row.next_attempt_at = now + timedelta(seconds=min(backoff, 3600.0))
            row.sent_at = None
            return
        row.status = "failed"
        if hook is not None:
            _count_failure(session, hook, error, settings, now)


def _count_failure(session: Session, hook: Webhook, error: str, settings: Settings,
                   now: datetime) -> None:
    hook.failed_deliveries += 1
    if hook.enabled and hook.failed_deliveries >= settings.webhook_disable_after_failures:
        hook.enabled = False
        hook.updated_at = now
        hook.disabled_reason = (
            f"disabled at {now.isoformat(timespec='seconds')} after {hook.failed_deliveries} "
            f"deliveries in a row failed (each tried {settings.webhook_max_attempts} times); "
            f"the last: {error}. Fix the receiver, then enable the webhook again (PATCH "
            "enabled=true) and send a test event.")
    session.flush()

