"""Delivering a webhook event: one attempt per call, by a worker. The delivery row is the
outbox entry; a worker takes it from the outbox (`outbox.py`), and an attempt claims it
(attempts + 1, and its next attempt pushed past the attempt's own deadline, so a worker
that dies mid-attempt leaves it to a later one), posts the CloudEvent signed for every
active secret (`transport`), and records the answer. Failures are retried with exponential
backoff; after `webhook_max_attempts` the delivery fails for good, and after
`webhook_disable_after_failures` such deliveries in a row the webhook is disabled with the
reason. Deliveries are at least once: receivers deduplicate on `webhook-id`.

No broker carries deliveries: each worker's senders take due rows themselves
(`worker/senders.py`), so an event never waits behind the jobs that hold a worker's pool.

What a hostile receiver can hold is bounded here and in the worker's senders:
- one attempt in flight per webhook: a worker takes a webhook's oldest due delivery only
  while none of its deliveries is taken or in flight, and the claim takes the webhook's
  own slot (`Webhook.attempt_key`) in a guarded update, so racing workers cannot run two
  at once;
- attempts never exceed `webhook_max_attempts`: the claim's update requires fewer, and a
  delivery whose last attempt died with its worker fails for good instead of being taken
  again;
- each attempt ends within `webhook_timeout_seconds` and reads no more than the answer's
  head (`transport`).
Claims and holds are compared by the database's clock (`database_now`), never a worker's
own: one whose clock runs fast would find every hold lapsed.

A delivery Cairn cannot sign (the key its webhook's secrets are sealed under is missing,
or its secrets do not open) spends no attempt and does not count against the webhook: it
says so in the delivery log, is tried again with growing pauses, counts in
`cairn_webhook_deliveries_unsigned_total` (an alert), and fails for good once the whole
retry span of a delivery has passed.

The delivery log shows the tenant what happened as a category ("connection refused",
"timeout", "HTTP 500"), never the receiver's answer or the error's text: an allowed
internal receiver's reply, its address or a resolver's message is not the tenant's to
read. The operator's log has the detail, naming the webhook and its shown host, never its
URL (whose path and query often carry the receiver's token)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import or_, update
from sqlalchemy.orm import Session

from services.db import Database, database_now
from services.errors import InvalidInput
from services.metrics import events as metrics
from services.records.webhooks import EventDelivery, Webhook
from services.settings import Settings
from services.status import DELIVERY_TRANSITIONS, DeliveryStatus, guarded_update
from services.webhooks import addresses, keys, openstack, signing, transport
from services.webhooks.sealing import WebhookKeyUnavailable
from services.webhooks.secrets import active_secrets

log = logging.getLogger(__name__)

CLAIM_MARGIN = timedelta(seconds=30)
"""A claim outlives its attempt's deadline by this: only a worker that died (or stalled)
mid-attempt lets it lapse."""

UNSIGNED = ("not sent yet: Cairn cannot sign this event now (a problem on Cairn's side, "
            "its operator is alerted); it is tried again")
UNSIGNED_GAVE_UP = ("not sent: Cairn could not sign this event within its retry time (a "
                    "problem on Cairn's side, its operator was alerted)")


@dataclass(frozen=True)
class Attempt:
    delivery_id: str
    number: int
    event_type: str
    body: bytes
    webhook_id: str | None
    """None: an OpenStack notification."""
    url: str | None
    secrets: list[str]

    @property
    def key(self) -> str:
        return attempt_key(self.delivery_id, self.number)


def attempt_key(delivery_id: str, number: int) -> str:
    """What a webhook's slot holds while this attempt is in flight."""
    return f"{delivery_id}/{number}"


def retry_span(settings: Settings) -> timedelta:
    """How long a delivery's attempts may take in all: every backoff and every deadline."""
    backoffs = sum(min(settings.webhook_retry_base_seconds * 2 ** n, 3600.0)
                   for n in range(settings.webhook_max_attempts - 1))
    return timedelta(seconds=backoffs + settings.webhook_max_attempts
                     * settings.webhook_timeout_seconds)


def deliver(db: Database, settings: Settings, delivery_id: str) -> None:
    attempt = _claim(db, settings, delivery_id)
    if attempt is None:
        return
    code: int | None = None
    try:
        if attempt.url is None:
            error = _notify(settings, attempt)
        else:
            code, error = _post(settings, attempt)
    except Exception:
        log.exception("webhook delivery %s attempt %d failed inside Cairn",
                      attempt.delivery_id, attempt.number)
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
            allowed=settings.webhook_allowed_networks,
            refused_networks=settings.webhook_refused_networks,
            seconds=settings.webhook_timeout_seconds, proxy=settings.webhook_proxy_url)
    except InvalidInput as exc:
        log.info("webhook %s (%s) delivery %s attempt %d refused: %s", attempt.webhook_id,
                 addresses.shown_host(attempt.url), attempt.delivery_id, attempt.number, exc)
        return None, exc.message.removeprefix("url: ")
    except transport.AttemptFailed as exc:
        log.info("webhook %s (%s) delivery %s attempt %d failed: %s", attempt.webhook_id,
                 addresses.shown_host(attempt.url), attempt.delivery_id, attempt.number,
                 exc.detail)
        return None, exc.category
    if 200 <= code < 300:
        return code, None
    if 300 <= code < 400:
        return code, f"HTTP {code} (redirects are not followed)"
    return code, f"HTTP {code}"


def _claim(db: Database, settings: Settings, delivery_id: str) -> Attempt | None:
    with db.session() as session:
        now = database_now(session)
        hold = now + timedelta(seconds=settings.webhook_timeout_seconds) + CLAIM_MARGIN
        claimed = session.execute(
            update(EventDelivery)
            .where(EventDelivery.id == delivery_id, EventDelivery.status == DeliveryStatus.PENDING,
                   EventDelivery.next_attempt_at <= now,
                   EventDelivery.attempts < settings.webhook_max_attempts)
            .values(attempts=EventDelivery.attempts + 1, next_attempt_at=hold))
        if getattr(claimed, "rowcount", 0) != 1:
            # Delivered, failed for good, another attempt holds it, or its last attempt
            # died: the next round of `take_due` fails that one for good.
            return None
        row = session.get(EventDelivery, delivery_id)
        assert row is not None
        if row.webhook_id is None:
            return Attempt(row.id, row.attempts, row.event_type, row.body.encode(), None,
                           None, [])
        hook = session.get(Webhook, row.webhook_id)
        if hook is None or (not hook.enabled and row.event_type != "webhook.test"):
            guarded_update(session, EventDelivery, row.id, DELIVERY_TRANSITIONS,
                           DeliveryStatus.FAILED, expect=DeliveryStatus.PENDING,
                           extra={"last_error": "the webhook was disabled before this "
                                                "event went out"})
            return None
        took = session.execute(
            update(Webhook)
            .where(Webhook.id == hook.id,
                   or_(Webhook.attempt_until.is_(None), Webhook.attempt_until <= now))
            .values(attempt_key=attempt_key(row.id, row.attempts), attempt_until=hold))
        if getattr(took, "rowcount", 0) != 1:
            # This attempt never happened: the delivery keeps its attempts and is taken
            # again once the webhook is free (`take_due` skips busy webhooks).
            session.rollback()
            session.execute(update(EventDelivery).where(EventDelivery.id == delivery_id)
                            .values(sent_at=None))
            log.info("webhook delivery %s not attempted now: another attempt to webhook %s "
                     "is in flight", delivery_id, hook.id)
            return None
        try:
            keyring = keys.for_use(session, settings)
            secrets = active_secrets(keyring.open(hook.id, hook.sealed_secrets), now)
            if not secrets:
                raise ValueError("none of the webhook's secrets is active")
        except Exception as exc:
            # Not the receiver's failure: no attempt is spent, nothing counts against the
            # webhook, and the operator is told.
            session.rollback()
            _cannot_sign(session, settings, delivery_id, hook.id, exc, now)
            return None
        return Attempt(row.id, row.attempts, row.event_type, row.body.encode(), hook.id,
                       hook.url, secrets)


def _cannot_sign(session: Session, settings: Settings, delivery_id: str, webhook_id: str,
                 exc: Exception, now: datetime) -> None:
    """A delivery Cairn cannot sign: the tenant's log says so, it is tried again after a
    pause as long as its age (growing like a failed delivery's), and it fails for good once
    a whole retry span has passed, without counting against the webhook."""
    reason = "key" if isinstance(exc, WebhookKeyUnavailable) else "internal"
    metrics.webhook_deliveries_unsigned.labels(reason).inc()
    if isinstance(exc, WebhookKeyUnavailable):
        log.error("webhook %s delivery %s cannot be signed: %s", webhook_id, delivery_id,
                  exc.message)
    else:
        log.error("webhook %s delivery %s cannot be signed", webhook_id, delivery_id,
                  exc_info=exc)
    row = session.get(EventDelivery, delivery_id, with_for_update=True)
    if row is None or row.status != DeliveryStatus.PENDING:
        return
    age = now - row.created_at
    if age >= retry_span(settings):
        guarded_update(session, EventDelivery, row.id, DELIVERY_TRANSITIONS,
                       DeliveryStatus.FAILED, expect=DeliveryStatus.PENDING,
                       extra={"last_error": UNSIGNED_GAVE_UP})
        return
    pause = max(timedelta(seconds=settings.webhook_retry_base_seconds), age)
    row.last_error = UNSIGNED
    row.next_attempt_at = now + min(pause, timedelta(hours=1))
    row.sent_at = None


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
    with db.session() as session:
        now = database_now(session)
        if attempt.webhook_id is not None:
            session.execute(update(Webhook).where(Webhook.id == attempt.webhook_id,
                                                  Webhook.attempt_key == attempt.key)
                            .values(attempt_key=None, attempt_until=None))
        row = session.get(EventDelivery, attempt.delivery_id, with_for_update=True)
        if row is None or row.attempts != attempt.number \
                or row.status != DeliveryStatus.PENDING:
            return  # deleted with its webhook, or a later attempt owns it
        if error is None:
            delivered = guarded_update(
                session, EventDelivery, row.id, DELIVERY_TRANSITIONS, DeliveryStatus.SUCCEEDED,
                expect=DeliveryStatus.PENDING, where=(EventDelivery.attempts == attempt.number,),
                extra={"delivered_at": now, "last_status_code": code, "last_error": None})
            hook = session.get(Webhook, row.webhook_id) if row.webhook_id else None
            if delivered and hook is not None:
                hook.failed_deliveries = 0
            return
        row.last_status_code, row.last_error = code, error
        if row.attempts < settings.webhook_max_attempts:
            backoff = settings.webhook_retry_base_seconds * 2 ** (row.attempts - 1)
            row.next_attempt_at = now + timedelta(seconds=min(backoff, 3600.0))
            row.sent_at = None
            return
        give_up(session, settings, row, error, now)


def give_up(session: Session, settings: Settings, row: EventDelivery, error: str,
             now: datetime) -> None:
    # Guarded: of processes racing to give up one delivery (SQLite takes no row locks),
    # one counts it against the webhook.
    gave_up = guarded_update(session, EventDelivery, row.id, DELIVERY_TRANSITIONS,
                             DeliveryStatus.FAILED, expect=DeliveryStatus.PENDING,
                             extra={"last_error": error},
                             where=(EventDelivery.attempts == row.attempts,))
    session.refresh(row)
    if not gave_up:
        return
    hook = session.get(Webhook, row.webhook_id) if row.webhook_id else None
    if hook is None:
        return
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
