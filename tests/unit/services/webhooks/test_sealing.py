"""Webhook secrets at rest: sealed under the operator's key, bound to their webhook and
purpose, and a process with webhooks to serve refuses to start without that key or with
another."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.db import Database
from services.records.webhooks import Webhook
from services.settings import Settings
from services.webhooks import sealing, secrets
from services.webhooks.sealing import SecretSeal, WebhookKeyUnavailable


def _settings(**values: Any) -> Settings:
    return Settings(auth_strategy="noauth", environment="development", **values)


def test_a_sealed_secret_opens_only_for_its_webhook_and_purpose_under_its_key() -> None:
    seal = SecretSeal(bytes(range(32)))
    stored, secret = secrets.first()
    sealed = seal.seal("w1", stored)
    assert secret not in sealed
    assert "whsec_" not in sealed
    assert json.loads(seal.open("w1", sealed))[0]["secret"] == secret
    for opening in (lambda: seal.open("w2", sealed),
                    lambda: seal.open("w1", sealed, sealing.CREATED_ANSWER),
                    lambda: SecretSeal(bytes(32)).open("w1", sealed),
                    lambda: seal.open("w1", stored)):  # a row written before sealing
        with pytest.raises(WebhookKeyUnavailable, match="not the key they were sealed with"):
            opening()


def _key(tmp_path: Path, name: str, fill: int) -> Path:
    path = tmp_path / name
    path.write_text(bytes([fill]).hex() * 32)
    return path


def test_start_is_refused_without_the_key_or_with_another_once_webhooks_exist(
        db: Database, tmp_path: Path) -> None:
    key = _key(tmp_path, "webhook.key", 1)
    without = _settings(database_url="sqlite://")
    sealing.check_at_start(db, without)  # no webhooks: nothing to open
    seal = sealing.required(_settings(webhook_secret_key_file=key))
    with db.session() as session:
        session.add(Webhook(id="w1", project_id="p1", url="https://8.8.8.8/",
                            sealed_secrets=seal.seal("w1", secrets.first()[0]),
                            event_types="[]", enabled=True, failed_deliveries=0))
    with pytest.raises(WebhookKeyUnavailable, match="CAIRN_WEBHOOK_SECRET_KEY_FILE, which is "
                                                    "not set"):
        sealing.check_at_start(db, without)
    with pytest.raises(WebhookKeyUnavailable, match="not the key they were sealed with"):
        sealing.check_at_start(db, _settings(webhook_secret_key_file=_key(tmp_path, "o", 2)))
    sealing.check_at_start(db, _settings(webhook_secret_key_file=key))


def test_webhooks_cannot_be_made_without_a_key() -> None:
    with pytest.raises(WebhookKeyUnavailable) as refusal:
        sealing.required(_settings())
    assert refusal.value.status_code == 503
