"""The delivery log keeps what ended for its days, and the outbox never loses what is due."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from services.db import Database
from services.records.webhooks import EventDelivery, Webhook
from services.webhooks.outbox import purge

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_purge_forgets_old_ended_deliveries_only(db: Database) -> None:
    with db.session() as session:
        session.add(Webhook(id="w1", project_id="p1", url="https://8.8.8.8/", sealed_secrets="",
                            event_types="[]", enabled=True, failed_deliveries=0))
        session.flush()
        for name, status, age in [("old-ok", "succeeded", 40), ("old-failed", "failed", 31),
                                  ("old-pending", "pending", 90), ("new-ok", "succeeded", 2)]:
            session.add(EventDelivery(id=name, webhook_id="w1", event_type="webhook.test",
                                      body="{}", status=status,
                                      created_at=NOW - timedelta(days=age),
                                      next_attempt_at=NOW))
    assert purge(db, NOW - timedelta(days=30)) == 2
    with db.session() as session:
        kept = set(session.scalars(select(EventDelivery.id)))
    assert kept == {"old-pending", "new-ok"}
