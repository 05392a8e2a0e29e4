"""The webhook deliveries' outbox, as the workers take from it: each worker's senders take
due rows themselves (`worker/senders.py`), fairly between projects, one delivery of a
webhook at a time, and no row twice within RESEND_AFTER; a delivery whose last allowed
attempt died with its worker fails for good there; and ended deliveries are purged once
the delivery log no longer shows them. One attempt at one delivery is `delivery.py`'s."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session

from services.db import Database, database_now
from services.records.webhooks import EventDelivery, Webhook
from services.settings import Settings
from services.status import DeliveryStatus
from services.webhooks import delivery

RESEND_AFTER = timedelta(seconds=60)
"""A delivery a worker took is not taken again before this (it waits for a sender of that
worker); one whose worker died is taken again after it."""

CANDIDATES = 200
"""Due deliveries a worker looks at per round to fill its senders fairly."""

NOTIFICATIONS = "openstack"
"""The fairness key of OpenStack notifications (a webhook's is its project)."""


def take_due(db: Database, settings: Settings, *, room: int,
             held: Mapping[str, int]) -> list[tuple[str, str]]:
    """A worker's step: up to `room` due deliveries, each with its fairness key (its
    webhook's project), taken so no other worker takes them for RESEND_AFTER. A webhook's
    oldest only, and only while none of its deliveries is taken or in flight; at most
    `webhook_senders_per_project` of one key together with what the worker already
    `held`, so one project's deliveries never fill a worker's senders."""
    if room <= 0:
        return []
    with db.session() as session:
        now = database_now(session)
        cutoff = now - RESEND_AFTER
        _fail_exhausted(session, settings, now)
        counts = Counter(held)
        picked: list[tuple[str, str]] = []
        for delivery_id, key in _due(session, settings, now, cutoff):
            if counts[key] >= settings.webhook_senders_per_project:
                continue
            counts[key] += 1
            picked.append((delivery_id, key))
            if len(picked) >= room:
                break
        if not picked:
            return []
        # Guarded: of workers racing for a row, one takes it.
        taken = set(session.scalars(
            update(EventDelivery)
            .where(EventDelivery.id.in_([d for d, _ in picked]),
                   EventDelivery.status == DeliveryStatus.PENDING,
                   or_(EventDelivery.sent_at.is_(None), EventDelivery.sent_at <= cutoff))
            .values(sent_at=now).returning(EventDelivery.id)
            .execution_options(synchronize_session=False)))
    return [(delivery_id, key) for delivery_id, key in picked if delivery_id in taken]


def _due(session: Session, settings: Settings, now: datetime,
         cutoff: datetime) -> list[tuple[str, str]]:
    """Due deliveries no worker holds, with their fairness keys: a webhook's oldest only,
    and none of a webhook that has a delivery taken or in flight. Every key's oldest comes
    first, then every key's second..., each round oldest first: projects with many due
    deliveries cannot push another project's out of the CANDIDATES looked at."""
    due = (EventDelivery.status == DeliveryStatus.PENDING, EventDelivery.next_attempt_at <= now,
           EventDelivery.attempts < settings.webhook_max_attempts,
           or_(EventDelivery.sent_at.is_(None), EventDelivery.sent_at <= cutoff))
    out = select(EventDelivery.webhook_id).where(
        EventDelivery.webhook_id.is_not(None), EventDelivery.status == DeliveryStatus.PENDING,
        EventDelivery.sent_at > cutoff)
    busy = select(Webhook.id).where(Webhook.attempt_until > now)
    oldest = (
        select(EventDelivery.id, EventDelivery.next_attempt_at, Webhook.project_id,
               func.row_number().over(
                   partition_by=EventDelivery.webhook_id,
                   order_by=(EventDelivery.next_attempt_at, EventDelivery.created_at,
                             EventDelivery.id)).label("rank"))
        .join(Webhook, Webhook.id == EventDelivery.webhook_id)
        .where(*due, EventDelivery.webhook_id.not_in(out),
               EventDelivery.webhook_id.not_in(busy))
        .subquery())
    turns = (
        select(oldest.c.id, oldest.c.project_id, oldest.c.next_attempt_at,
               func.row_number().over(partition_by=oldest.c.project_id,
                                      order_by=oldest.c.next_attempt_at).label("turn"))
        .where(oldest.c.rank == 1).subquery())
    found: list[tuple[int, datetime, str, str]] = [
        (row.turn, row.next_attempt_at, row.id, row.project_id) for row in session.execute(
            select(turns).order_by(turns.c.turn, turns.c.next_attempt_at).limit(CANDIDATES))]
    found += [(turn, row.next_attempt_at, row.id, NOTIFICATIONS)
              for turn, row in enumerate(session.execute(
                  select(EventDelivery.id, EventDelivery.next_attempt_at)
                  .where(*due, EventDelivery.webhook_id.is_(None))
                  .order_by(EventDelivery.next_attempt_at).limit(CANDIDATES)), 1)]
    return [(delivery_id, key) for _, _, delivery_id, key in sorted(found)]


def _fail_exhausted(session: Session, settings: Settings, now: datetime) -> None:
    """Deliveries whose last allowed attempt died with its worker (the claim lapsed) fail
    for good: taken again, they would go past `webhook_max_attempts`."""
    for row in session.scalars(
            select(EventDelivery).where(
                EventDelivery.status == DeliveryStatus.PENDING,
                EventDelivery.attempts >= settings.webhook_max_attempts,
                EventDelivery.next_attempt_at <= now).with_for_update(skip_locked=True)
    ).all():
        delivery.give_up(session, settings, row, "the last attempt did not finish (its worker "
                 "stopped)", now)


def purge(db: Database, before: datetime) -> int:
    """Forget deliveries that ended (succeeded or failed for good) before `before`: the
    delivery log keeps `event_delivery_log_days`, the outbox only what is still due."""
    with db.session() as session:
        result = session.execute(
            delete(EventDelivery).where(EventDelivery.status != DeliveryStatus.PENDING,
                                        EventDelivery.created_at < before))
        return int(getattr(result, "rowcount", 0) or 0)
