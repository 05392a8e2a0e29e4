"""A wrong or missing webhook key never lets a process run with it, and never leaves
deliveries looping silently: cairn-api and cairn-worker refuse to start without the
deployment's key (recorded when first used, so also before any webhook exists) or with
another, a worker waits for its database and then gives up rather than start unchecked, an
API that started while its database was away checks before it seals, and a delivery a
running worker cannot sign says so, spends no attempt, is counted for the operator's
alert and ends after its retry span without counting against the webhook."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy
from fastapi.testclient import TestClient

from api.main import create_app
from services.webhooks import delivery, sealing
from services.webhooks.sealing import Keyring, WebhookKeyUnavailable
from tests.support.databases import migrate, migrated_database
from tests.support.redis_server import free_port
from tests.support.stack import BIN, REPO, Stack
from tests.support.webhook_receiver import Receiver

pytestmark = pytest.mark.production_database_only


@pytest.fixture
def project() -> dict[str, str]:
    return {"X-Project-Id": f"keyed-{uuid.uuid4().hex[:8]}", "X-Roles": "member"}


@pytest.fixture
def a_webhook(stack: Stack, project: dict[str, str]) -> Iterator[str]:
    receiver = Receiver()
    made = stack.post("/v1/webhooks", {"url": receiver.url}, project)
    assert made.status_code == 201, made.text
    try:
        yield str(made.json()["id"])
    finally:
        receiver.close()
        # Deleted: a secret sealed under a key no process has would stop the next start.
        stack.delete(f"/v1/webhooks/{made.json()['id']}", project)


def _worker(env: dict[str, str], **changes: str | None) -> subprocess.CompletedProcess[str]:
    """cairn-worker run with the stack's settings and `changes` (None: unset); it is
    expected to refuse to start."""
    given = {**os.environ, **env}
    for name, value in changes.items():
        if value is None:
            given.pop(name, None)
        else:
            given[name] = value
    return subprocess.run([str(BIN / "cairn-worker")], env=given, cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)


def _key_file(directory: Path, fill: int) -> Path:
    path = directory / f"key-{fill}"
    path.write_text(bytes([fill]).hex() * 32 + "\n")
    return path


def test_a_worker_without_the_key_does_not_start(stack: Stack, a_webhook: str) -> None:
    missing = _worker(stack.env, CAIRN_WEBHOOK_SECRET_KEY_FILE=None)
    assert missing.returncode != 0
    assert "CAIRN_WEBHOOK_SECRET_KEY_FILE is not set" in missing.stderr, missing.stderr


def test_an_api_without_the_key_or_with_another_does_not_start(
        stack: Stack, a_webhook: str, tmp_path: Path) -> None:
    keyless = stack.settings.model_copy(update={"webhook_secret_key_file": None})
    with pytest.raises(WebhookKeyUnavailable, match="CAIRN_WEBHOOK_SECRET_KEY_FILE is not "
                                                    "set"), TestClient(create_app(keyless)):
        pass
    wrong = stack.settings.model_copy(update={"webhook_secret_key_file": _key_file(tmp_path,
                                                                                    0xCD)})
    with pytest.raises(WebhookKeyUnavailable, match="deployment's webhook key is"), \
            TestClient(create_app(wrong)):
        pass


def test_processes_with_different_keys_never_both_run_even_before_any_webhook(
        stack: Stack, tmp_path: Path) -> None:
    """The first process to use a key makes it the deployment's: an API with key A on a
    new deployment, then a worker with key B, is refused (no webhook exists to open yet);
    so is a worker with no key at all once a key was used."""
    with migrated_database("postgresql", tmp_path) as url:
        key_a, key_b = _key_file(tmp_path, 0xA1), _key_file(tmp_path, 0xB2)
        api = stack.settings.model_copy(update={"database_url": url,
                                                "webhook_secret_key_file": key_a})
        with TestClient(create_app(api)):
            pass
        env = {**stack.env, "CAIRN_DATABASE_URL": url}
        other = _worker(env, CAIRN_WEBHOOK_SECRET_KEY_FILE=str(key_b))
        assert other.returncode != 0
        assert f"deployment's webhook key is {sealing.key_id(bytes([0xA1]) * 32)}" \
            in other.stderr, other.stderr
        keyless = _worker(env, CAIRN_WEBHOOK_SECRET_KEY_FILE=None)
        assert keyless.returncode != 0
        assert "CAIRN_WEBHOOK_SECRET_KEY_FILE is not set" in keyless.stderr, keyless.stderr


def test_a_worker_whose_database_does_not_answer_gives_up_instead_of_starting_unchecked(
        stack: Stack) -> None:
    started = time.monotonic()
    away = _worker(stack.env, CAIRN_WORKER_DATABASE_WAIT_SECONDS="2",
                   CAIRN_DATABASE_URL=f"postgresql+psycopg://cairn@127.0.0.1:{free_port()}/x")
    assert away.returncode != 0
    assert "could not check the webhook secrets' key against the database within 2 s" \
        in away.stderr, away.stderr
    assert time.monotonic() - started < 30


def test_an_api_that_started_without_its_database_checks_the_key_before_it_seals(
        stack: Stack, tmp_path: Path, project: dict[str, str]) -> None:
    """The API serves 503s while its database is away rather than refuse to start; its
    key is checked once the database answers, before the first secret is sealed."""
    later = tmp_path / "later"
    url = f"sqlite:///{later / 'cairn.db'}"
    wrong = stack.settings.model_copy(update={
        "database_url": url, "webhook_secret_key_file": _key_file(tmp_path, 0xCD)})
    receiver = Receiver()
    try:
        with TestClient(create_app(wrong)) as api:  # starts: nothing to check against yet
            assert api.get("/v1/webhooks", headers=project).status_code == 503
            later.mkdir()
            migrate(url)
            deployment = stack.settings.model_copy(update={"database_url": url})
            with TestClient(create_app(deployment)):  # another API records the real key
                pass
            refused = api.post("/v1/webhooks", json={"url": receiver.url}, headers=project)
    finally:
        receiver.close()
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "webhook_key_unavailable"
    assert "deployment's webhook key is" in refused.json()["error"]["message"]


def _deliveries(stack: Stack, headers: dict[str, str], hook: str) -> list[dict[str, Any]]:
    answer = stack.get(f"/v1/webhooks/{hook}/deliveries", headers)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["deliveries"])


def _unsigned(stack: Stack) -> float:
    metrics = httpx.get(f"http://127.0.0.1:{stack.env['CAIRN_WORKER_METRICS_PORT']}/metrics",
                        timeout=10).text
    for line in metrics.splitlines():
        if line.startswith('cairn_webhook_deliveries_unsigned_total{reason="key"}'):
            return float(line.split()[-1])
    raise AssertionError("the worker exports no cairn_webhook_deliveries_unsigned_total")


def test_a_delivery_the_worker_cannot_sign_says_so_and_ends_without_blaming_the_webhook(
        stack: Stack, a_webhook: str, project: dict[str, str]) -> None:
    """A webhook sealed under a key the running worker lacks (an API whose key file moved
    on first): no attempt, the tenant's log says Cairn cannot sign, the operator's counter
    rises, and once the delivery's retry span has passed it fails for good, the webhook's
    failures untouched."""
    engine = sqlalchemy.create_engine(stack.settings.database_url)
    try:
        with engine.begin() as db:
            db.execute(sqlalchemy.text("UPDATE webhooks SET sealed_secrets = :sealed "
                                       "WHERE id = :id"),
                       {"id": a_webhook, "sealed": Keyring([os.urandom(32)]).seal(
                           a_webhook, '[{"secret": "whsec_AAAA", "expires_at": null}]')})
    finally:
        engine.dispose()
    before = _unsigned(stack)
    sent = stack.post(f"/v1/webhooks/{a_webhook}/test", {}, project)
    assert sent.status_code == 202, sent.text
    deadline = time.monotonic() + 10
    while True:
        (found,) = _deliveries(stack, project, a_webhook)
        if found["last_error"] is not None or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (found["status"], found["attempts"], found["last_error"]) == (
        "pending", 0, delivery.UNSIGNED), found
    assert _unsigned(stack) > before
    span = delivery.retry_span(stack.settings).total_seconds()
    deadline = time.monotonic() + span + 20
    while found["status"] == "pending" and time.monotonic() < deadline:
        time.sleep(0.5)
        (found,) = _deliveries(stack, project, a_webhook)
    assert (found["status"], found["attempts"], found["last_error"]) == (
        "failed", 0, delivery.UNSIGNED_GAVE_UP), found
    hook = stack.get(f"/v1/webhooks/{a_webhook}", project).json()
    assert (hook["enabled"], hook["failed_deliveries"]) == (True, 0)
