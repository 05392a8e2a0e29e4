"""What a hostile receiver can hold is bounded by the outbox's rules: one attempt in flight
per webhook (a worker takes a webhook's oldest delivery only while none is out, and the
claim takes the webhook's slot), no more of a project's deliveries than its share of a
worker's senders, and never more than `webhook_max_attempts` attempts, even when a worker
dies during the last one or a claim races another. A delivery Cairn cannot sign spends no
attempt, says so, and fails for good after a retry span without counting against the
webhook."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from services.db import Database
from services.metrics import events as metrics
from services.records.webhooks import EventDelivery, Webhook
from services.settings import Settings
from services.webhooks import delivery, outbox, sealing, secrets

NOW = datetime.now(UTC).replace(microsecond=0)


def _take(db: Database, settings: Settings, room: int = 8,
          held: dict[str, int] | None = None) -> list[tuple[str, str]]:
    return sorted(outbox.take_due(db, settings, room=room, held=held or {}))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    key = tmp_path / "webhook.key"
    key.write_text("ab" * 32)
    return Settings(auth_strategy="noauth", environment="development",
                    webhook_secret_key_file=key, webhook_max_attempts=3)


def _hook(db: Database, settings: Settings, hook_id: str, project: str = "p1") -> None:
    keyring = sealing.for_settings(settings)
    assert keyring is not None
    with db.session() as session:
        session.add(Webhook(id=hook_id, project_id=project, url="https://8.8.8.8/",
                            sealed_secrets=keyring.seal(hook_id, secrets.first()[0]),
                            event_types="[]", enabled=True, failed_deliveries=0))


def _delivery(db: Database, delivery_id: str, hook_id: str | None, *, age: int = 0,
              attempts: int = 0, event_type: str = "webhook.test") -> None:
    with db.session() as session:
        session.add(EventDelivery(id=delivery_id, webhook_id=hook_id, event_type=event_type,
                                  body="{}", status="pending", attempts=attempts,
                                  next_attempt_at=NOW - timedelta(seconds=age),
                                  created_at=NOW - timedelta(seconds=age)))


def _row(db: Database, delivery_id: str) -> EventDelivery:
    with db.session() as session:
        row = session.get(EventDelivery, delivery_id)
        assert row is not None
        return row


def test_a_webhooks_oldest_delivery_goes_out_alone(db: Database, settings: Settings) -> None:
    _hook(db, settings, "w1")
    _hook(db, settings, "w2", project="p2")
    for number in range(5):
        _delivery(db, f"w1-{number}", "w1", age=10 - number)
    _delivery(db, "w2-0", "w2")
    _delivery(db, "note", None)
    assert _take(db, settings) == [("note", "openstack"), ("w1-0", "p1"), ("w2-0", "p2")]
    # Taken, not yet answered: nothing more of w1 goes, however many are due, and no
    # other worker takes what one took.
    assert _take(db, settings) == []


def test_a_worker_takes_no_more_than_its_room_and_a_projects_share(
        db: Database, settings: Settings) -> None:
    for number in range(4):
        _hook(db, settings, f"h{number}", project="hostile")
        _delivery(db, f"h{number}", f"h{number}", age=10)
    _hook(db, settings, "g", project="healthy")
    _delivery(db, "g", "g", age=1)  # younger than all of hostile's
    # The project's share is 2 (the default), of which the worker already holds one.
    taken = _take(db, settings, room=8, held={"hostile": 1})
    assert sorted(key for _, key in taken) == ["healthy", "hostile"]
    assert _take(db, settings, room=0) == []
    (one,) = _take(db, settings, room=1)
    assert one[1] == "hostile"
    assert len(_take(db, settings, room=8)) == 2  # the last two, one room each


def test_every_projects_oldest_delivery_is_taken_before_any_projects_second(
        db: Database, settings: Settings) -> None:
    for number in range(5):
        _hook(db, settings, f"m{number}", project="many")
        _delivery(db, f"m{number}", f"m{number}", age=100 - number)
    _hook(db, settings, "o", project="one")
    _delivery(db, "o", "o", age=1)
    assert sorted(key for _, key in _take(db, settings, room=2)) == ["many", "one"]


def test_a_second_attempt_to_a_busy_webhook_waits_and_costs_nothing(
        db: Database, settings: Settings) -> None:
    _hook(db, settings, "w1")
    _delivery(db, "a", "w1", age=2)
    _delivery(db, "b", "w1", age=1)
    first = delivery._claim(db, settings, "a")
    assert first is not None
    assert first.secrets
    # Racing schedulers handed out b too: its claim finds the webhook busy.
    assert delivery._claim(db, settings, "b") is None
    assert _row(db, "b").attempts == 0
    assert _row(db, "b").sent_at is None  # taken again once the webhook is free
    assert _take(db, settings) == []  # busy
    delivery._record(db, settings, first, 200, None)
    done = _row(db, "a")
    assert (done.status, done.last_status_code, done.last_error) == ("succeeded", 200, None)
    assert done.delivered_at is not None
    assert _take(db, settings) == [("b", "p1")]
    assert delivery._claim(db, settings, "b") is not None


def test_attempts_never_pass_the_maximum(db: Database, settings: Settings) -> None:
    _hook(db, settings, "w1")
    _delivery(db, "d", "w1", age=5, attempts=3)  # the last attempt's worker died
    assert delivery._claim(db, settings, "d") is None
    assert _row(db, "d").attempts == 3
    assert _take(db, settings) == []
    row = _row(db, "d")
    assert (row.status, row.attempts) == ("failed", 3)
    assert "did not finish" in (row.last_error or "")
    with db.session() as session:
        assert session.scalars(select(Webhook.failed_deliveries)).one() == 1


def test_an_event_for_a_webhook_disabled_since_fails_unsent_and_without_blame(
        db: Database, settings: Settings) -> None:
    _hook(db, settings, "w1")
    _delivery(db, "event", "w1", age=2, event_type="backup.create.end")
    _delivery(db, "test", "w1", age=1)
    with db.session() as session:
        session.execute(update(Webhook).values(enabled=False))
    assert delivery._claim(db, settings, "event") is None
    row = _row(db, "event")
    assert (row.status, row.last_error) == ("failed", "the webhook was disabled before this "
                                                      "event went out")
    assert _take(db, settings) == [("test", "p1")]  # its owner's test event still goes
    assert delivery._claim(db, settings, "test") is not None
    with db.session() as session:
        assert session.scalars(select(Webhook.failed_deliveries)).one() == 0


def test_a_stale_attempt_does_not_free_the_webhook_for_a_later_one(
        db: Database, settings: Settings) -> None:
    _hook(db, settings, "w1")
    _delivery(db, "d", "w1", age=5)
    stale = delivery._claim(db, settings, "d")
    assert stale is not None
    with db.session() as session:  # its worker stalled past the claim: it lapses
        hook = session.get(Webhook, "w1")
        row = session.get(EventDelivery, "d")
        assert hook is not None
        assert row is not None
        hook.attempt_until = row.next_attempt_at = NOW - timedelta(seconds=1)
    later = delivery._claim(db, settings, "d")
    assert later is not None
    assert later.number == 2
    delivery._record(db, settings, stale, 500, "HTTP 500")  # the stalled one wakes up
    with db.session() as session:
        hook = session.get(Webhook, "w1")
        assert hook is not None
        assert hook.attempt_key == later.key
    assert _row(db, "d").last_error is None  # and records nothing over the later one


def _unsigned(reason: str) -> float:
    return metrics.webhook_deliveries_unsigned.labels(reason)._value.get()


def test_a_delivery_cairn_cannot_sign_spends_no_attempt_and_ends_without_blame(
        db: Database, settings: Settings) -> None:
    _hook(db, settings, "w1")
    _delivery(db, "d", "w1", age=5)
    keyless = settings.model_copy(update={"webhook_secret_key_file": None})
    before = _unsigned("key")
    assert delivery._claim(db, keyless, "d") is None
    row = _row(db, "d")
    assert (row.status, row.attempts, row.last_error) == ("pending", 0, delivery.UNSIGNED)
    assert row.next_attempt_at > NOW  # not again at once: after a pause as long as its age
    assert _unsigned("key") == before + 1
    with db.session() as session:
        hook = session.get(Webhook, "w1")
        assert hook is not None
        assert hook.attempt_key is None
    # Once a whole retry span has passed, it fails for good, not against the webhook.
    span = delivery.retry_span(settings)
    with db.session() as session:
        found = session.get(EventDelivery, "d")
        assert found is not None
        found.created_at = found.next_attempt_at = NOW - span
    assert delivery._claim(db, keyless, "d") is None
    row = _row(db, "d")
    assert (row.status, row.attempts, row.last_error) == ("failed", 0,
                                                          delivery.UNSIGNED_GAVE_UP)
    with db.session() as session:
        assert session.scalars(select(Webhook.failed_deliveries)).one() == 0


def test_secrets_that_do_not_parse_are_bounded_the_same_way(
        db: Database, settings: Settings) -> None:
    _hook(db, settings, "w1")
    keyring = sealing.for_settings(settings)
    assert keyring is not None
    with db.session() as session:
        hook = session.get(Webhook, "w1")
        assert hook is not None
        hook.sealed_secrets = keyring.seal("w1", "not json")
    _delivery(db, "d", "w1", age=5)
    before = _unsigned("internal")
    assert delivery._claim(db, settings, "d") is None
    assert _row(db, "d").last_error == delivery.UNSIGNED
    assert _row(db, "d").attempts == 0
    assert _unsigned("internal") == before + 1
