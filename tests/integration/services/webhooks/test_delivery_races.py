"""Claims racing on the real databases: however many workers reach for a webhook's
deliveries at once, and whatever their clocks say, one attempt is in flight per webhook,
and a delivery never gets more than `webhook_max_attempts` attempts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy
from fastapi.testclient import TestClient

from api.main import create_app
from services.db import Database
from services.settings import Settings
from services.webhooks import delivery, outbox
from tests.support.stack import webhook_key_file
from tests.support.webhook_receiver import Receiver

HEADERS = {"X-Project-Id": "racing", "X-Roles": "member"}


@pytest.fixture
def settings(fresh_database_url: str) -> Settings:
    return Settings(auth_strategy="noauth", environment="development",
                    database_url=fresh_database_url, webhook_max_attempts=3,
                    webhook_allowed_networks=["127.0.0.0/8"],
                    webhook_secret_key_file=webhook_key_file(), portal_dir=None)


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        yield client


def _hook_with_deliveries(api: TestClient, url: str, count: int) -> list[str]:
    made = api.post("/v1/webhooks", json={"url": url}, headers=HEADERS)
    assert made.status_code == 201, made.text
    return [api.post(f"/v1/webhooks/{made.json()['id']}/test", headers=HEADERS).json()["id"]
            for _ in range(count)]


def _claim_at_once(settings: Settings, delivery_ids: list[str]) -> list[delivery.Attempt]:
    db = Database(settings.database_url, pool_size=len(delivery_ids))
    start = threading.Barrier(len(delivery_ids))
    claimed: list[delivery.Attempt] = []

    def claim(delivery_id: str) -> None:
        start.wait()
        attempt = delivery._claim(db, settings, delivery_id)
        if attempt is not None:
            claimed.append(attempt)

    threads = [threading.Thread(target=claim, args=(d,)) for d in delivery_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    db.dispose()
    return claimed


def _attempts(settings: Settings) -> dict[str, int]:
    engine = sqlalchemy.create_engine(settings.database_url)
    try:
        with engine.connect() as db:
            return {row[0]: row[1] for row in db.execute(sqlalchemy.text(
                "SELECT id, attempts FROM event_deliveries"))}
    finally:
        engine.dispose()


def test_racing_claims_take_one_attempt_per_webhook(settings: Settings,
                                                    api: TestClient) -> None:
    receiver = Receiver()
    try:
        ids = _hook_with_deliveries(api, receiver.url, 6)
        claimed = _claim_at_once(settings, ids * 2)  # two workers reach for each
    finally:
        receiver.close()
    assert len(claimed) == 1, [a.delivery_id for a in claimed]
    assert sorted(_attempts(settings).values()) == [0, 0, 0, 0, 0, 1]


def test_racing_claims_never_pass_the_maximum(settings: Settings, api: TestClient) -> None:
    receiver = Receiver()
    try:
        (last,) = _hook_with_deliveries(api, receiver.url, 1)
    finally:
        receiver.close()
    engine = sqlalchemy.create_engine(settings.database_url)
    with engine.begin() as db:  # two attempts made; the hold of the second has lapsed
        db.execute(sqlalchemy.text("UPDATE event_deliveries SET attempts = 2"))
    engine.dispose()
    assert len(_claim_at_once(settings, [last] * 8)) == 1
    assert _attempts(settings) == {last: 3}
    engine = sqlalchemy.create_engine(settings.database_url)
    with engine.begin() as db:  # the third attempt's worker died: its claims lapse
        past = "'2000-01-01 00:00:00+00'" if engine.dialect.name == "postgresql" \
            else "'2000-01-01 00:00:00.000000'"
        db.execute(sqlalchemy.text(f"UPDATE event_deliveries SET next_attempt_at = {past}"))
        if "attempt_until" in {c["name"] for c in sqlalchemy.inspect(db).get_columns(
                "webhooks")}:  # the webhook's slot, where it has one
            db.execute(sqlalchemy.text(f"UPDATE webhooks SET attempt_until = {past}"))
    engine.dispose()
    assert _claim_at_once(settings, [last] * 8) == []
    assert _attempts(settings) == {last: 3}


@pytest.mark.production_database_only
def test_a_worker_whose_clock_runs_fast_does_not_take_a_held_attempt(
        settings: Settings, api: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims and holds are compared by the database's clock: a worker whose own clock runs
    two minutes fast finds another's attempt still held, and starts no second one (its own
    clock would say the hold lapsed). SQLite's clock is its one host's, so PostgreSQL only."""
    receiver = Receiver()
    try:
        (first,) = _hook_with_deliveries(api, receiver.url, 1)
    finally:
        receiver.close()
    db = Database(settings.database_url, pool_size=2)
    try:
        held = delivery._claim(db, settings, first)
        assert held is not None
        fast = datetime.now(UTC) + timedelta(minutes=2)
        for module in ("services.base", "services.db", "services.webhooks.delivery"):
            monkeypatch.setattr(f"{module}.utcnow", lambda: fast, raising=False)
        assert delivery._claim(db, settings, first) is None
        assert outbox.take_due(db, settings, room=8, held={}) == []
    finally:
        db.dispose()
    assert _attempts(settings) == {first: 1}
