"""Webhook secrets at rest: sealed under the key ring's first key, naming it by an id that
tells nothing of it, bound to their webhook; every key of the ring opens what it sealed,
so a rotation never leaves a secret unopenable. The deployment's key is recorded when
first used, and a process whose ring lacks it, or lacks a key some secret is sealed
under, or that has no ring once webhooks were used, is refused."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from services.db import Database
from services.records.webhooks import Webhook, WebhookSealingKey
from services.settings import Settings
from services.webhooks import keys, sealing, secrets
from services.webhooks.sealing import Keyring, WebhookKeyUnavailable

OLD, NEW, OTHER = bytes(range(32)), bytes(range(1, 33)), bytes(32)


def _settings(**values: Any) -> Settings:
    return Settings(auth_strategy="noauth", environment="development", **values)


def _key_file(tmp_path: Path, name: str, *ring: bytes) -> Path:
    path = tmp_path / name
    path.write_text("# the current key first\n" + "".join(f"{key.hex()}\n" for key in ring))
    return path


def test_a_sealed_secret_names_its_key_and_opens_only_for_its_webhook() -> None:
    ring = Keyring([OLD])
    stored, secret = secrets.first()
    sealed = ring.seal("w1", stored)
    assert secret not in sealed
    assert "whsec_" not in sealed
    assert sealing.sealed_under(sealed) == sealing.key_id(OLD) == ring.current
    assert OLD.hex() not in sealed
    assert json.loads(ring.open("w1", sealed))[0]["secret"] == secret
    for opening, why in ((lambda: ring.open("w2", sealed), "belong to another webhook"),
                         (lambda: Keyring([OTHER]).open("w1", sealed), "not in the key file"),
                         (lambda: ring.open("w1", stored), "not sealed"),
                         (lambda: ring.open("w1", sealed[:-8] + "AAAAAAA="), "were changed")):
        with pytest.raises(WebhookKeyUnavailable, match=why):
            opening()


def test_a_ring_seals_under_its_first_key_and_opens_under_every_key() -> None:
    old = Keyring([OLD]).seal("w1", "[]")
    rotated = Keyring([NEW, OLD])
    assert rotated.open("w1", old) == "[]"
    resealed = rotated.reseal("w1", old)
    assert resealed is not None
    assert sealing.sealed_under(resealed) == sealing.key_id(NEW)
    assert rotated.reseal("w1", resealed) is None
    assert Keyring([NEW]).open("w1", resealed) == "[]"
    with pytest.raises(WebhookKeyUnavailable):
        Keyring([OLD]).open("w1", resealed)


def test_a_key_file_holds_a_ring_and_is_read_again_when_replaced(tmp_path: Path) -> None:
    path = _key_file(tmp_path, "webhook.key", OLD)
    settings = _settings(webhook_secret_key_file=path)
    first = sealing.for_settings(settings)
    assert first is not None
    assert first.ids == (sealing.key_id(OLD),)
    replaced = _key_file(tmp_path, "next.key", NEW, OLD)
    replaced.replace(path)  # as a Kubernetes Secret's files are replaced
    second = sealing.for_settings(settings)
    assert second is not None
    assert second.ids == (sealing.key_id(NEW), sealing.key_id(OLD))
    _key_file(tmp_path, "next.key", NEW).replace(path)
    path.write_text("not a key\n")
    with pytest.raises(WebhookKeyUnavailable, match="line 1 must hold 64 hex digits"):
        sealing.for_settings(settings)
    with pytest.raises(WebhookKeyUnavailable, match="cannot read"):
        sealing.for_settings(_settings(webhook_secret_key_file=tmp_path / "missing"))


def _webhook(db: Database, ring: Keyring, webhook_id: str) -> None:
    with db.session() as session:
        session.add(Webhook(id=webhook_id, project_id="p1", url="https://8.8.8.8/",
                            sealed_secrets=ring.seal(webhook_id, secrets.first()[0]),
                            event_types="[]", enabled=True, failed_deliveries=0))


def _recorded(db: Database) -> str | None:
    with db.session() as session:
        return session.scalar(select(WebhookSealingKey.key_id))


def test_the_first_key_used_is_the_deployments_and_no_other_may_start(
        db: Database, tmp_path: Path) -> None:
    keyless = _settings()
    assert keys.check_at_start(db, keyless, wait=0)  # nothing used yet: nothing to check
    assert _recorded(db) is None
    # The API starts first with key A; a worker with key B is refused, though no webhook
    # exists yet.
    with_a = _settings(webhook_secret_key_file=_key_file(tmp_path, "a", OLD))
    assert keys.check_at_start(db, with_a, wait=0)
    assert _recorded(db) == sealing.key_id(OLD)
    with pytest.raises(WebhookKeyUnavailable, match=f"deployment's webhook key is "
                                                    f"{sealing.key_id(OLD)}"):
        keys.check_at_start(db, _settings(webhook_secret_key_file=_key_file(tmp_path, "b",
                                                                             OTHER)), wait=0)
    with pytest.raises(WebhookKeyUnavailable, match="CAIRN_WEBHOOK_SECRET_KEY_FILE is not set"):
        keys.check_at_start(db, keyless, wait=0)
    assert keys.check_at_start(db, with_a, wait=0)


def test_every_key_a_secret_is_sealed_under_must_be_in_the_ring(
        db: Database, tmp_path: Path) -> None:
    _webhook(db, Keyring([OLD]), "w1")
    _webhook(db, Keyring([NEW, OLD]), "w2")  # sealed by a process mid-rotation
    both = _settings(webhook_secret_key_file=_key_file(tmp_path, "both", NEW, OLD))
    assert keys.check_at_start(db, both, wait=0)
    assert _recorded(db) == sealing.key_id(NEW)  # the first ring to run records its first
    only_new = _settings(webhook_secret_key_file=_key_file(tmp_path, "new", NEW))
    with pytest.raises(WebhookKeyUnavailable,
                       match=f"1 webhook has its signing secrets sealed under key "
                             f"{sealing.key_id(OLD)}, which the key file"):
        keys.check_at_start(db, only_new, wait=0)
    # After a reseal the old key may go.
    done = keys.reseal(db, Keyring([NEW, OLD]))
    assert (done.resealed, done.already, done.failed) == (1, 1, {})
    assert keys.check_at_start(db, only_new, wait=0)


def test_reseal_records_no_key_while_some_secret_opens_under_none(
        db: Database, tmp_path: Path) -> None:
    _webhook(db, Keyring([OTHER]), "lost")
    _webhook(db, Keyring([OLD]), "kept")
    done = keys.reseal(db, Keyring([NEW, OLD]))
    assert done.resealed == 1
    assert list(done.failed) == ["lost"]
    assert _recorded(db) is None


def test_a_running_process_checks_a_changed_key_file_before_it_seals(
        db: Database, tmp_path: Path) -> None:
    path = _key_file(tmp_path, "webhook.key", OLD)
    settings = _settings(webhook_secret_key_file=path)
    assert keys.check_at_start(db, settings, wait=0)
    with db.session() as session:
        assert keys.for_use(session, settings).current == sealing.key_id(OLD)
    _key_file(tmp_path, "wrong", OTHER).replace(path)
    with db.session() as session, pytest.raises(WebhookKeyUnavailable, match="deployment's"):
        keys.for_use(session, settings)


def test_an_unreachable_database_is_waited_for_then_refused(tmp_path: Path) -> None:
    (tmp_path / "gone").mkdir()
    unreachable = Database(f"sqlite:///{tmp_path / 'gone' / 'nothing' / 'cairn.db'}")
    settings = _settings(webhook_secret_key_file=_key_file(tmp_path, "k", OLD))
    try:
        assert keys.check_at_start(unreachable, settings, wait=0) is False  # the API
        started = time.monotonic()
        with pytest.raises(keys.DatabaseNotReady, match="within 1 s"):
            keys.check_at_start(unreachable, settings, wait=1)  # the worker
        assert 0.4 < time.monotonic() - started < 5
    finally:
        unreachable.dispose()


def test_webhooks_cannot_be_made_without_a_key(db: Database) -> None:
    with db.session() as session, pytest.raises(WebhookKeyUnavailable) as refusal:
        keys.for_use(session, _settings())
    assert refusal.value.status_code == 503
