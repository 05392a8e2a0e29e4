"""Rotating the webhook secrets' key as docs/deploy.md says, on a real database with real
processes: add the new key to the ring, put it first, `cairn-manage webhooks reseal`,
drop the old key. Every secret still signs as before, the new key is the deployment's, and
a process left with only the old key is refused."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from services.db import Database
from services.records.webhooks import Webhook
from services.webhooks import keys, sealing
from services.webhooks.sealing import WebhookKeyUnavailable
from tests.support.databases import migrated_database
from tests.support.stack import BIN, REPO, Stack
from tests.support.webhook_receiver import Receiver

pytestmark = pytest.mark.production_database_only

OLD, NEW = os.urandom(32), os.urandom(32)


def _ring(path: Path, *ring: bytes) -> None:
    """Replaced as a Kubernetes Secret's file is: a new file moved over the old one."""
    made = path.with_name(path.name + ".new")
    made.write_text("".join(f"{key.hex()}\n" for key in ring))
    made.replace(path)


def _manage(url: str, key_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env.update(CAIRN_DATABASE_URL=url, CAIRN_WEBHOOK_SECRET_KEY_FILE=str(key_file))
    return subprocess.run([str(BIN / "cairn-manage"), "webhooks", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)


def _secrets(url: str, ring: sealing.Keyring) -> dict[str, str]:
    """Each webhook's current secret, opened with `ring`."""
    db = Database(url, pool_size=1)
    try:
        with db.session() as session:
            return {hook.id: json.loads(ring.open(hook.id, hook.sealed_secrets))[0]["secret"]
                    for hook in session.query(Webhook)}
    finally:
        db.dispose()


def test_a_key_rotation_keeps_every_secret_and_retires_the_old_key(
        stack: Stack, tmp_path: Path) -> None:
    key_file = tmp_path / "secret.key"
    _ring(key_file, OLD)
    project = {"X-Project-Id": "rotating", "X-Roles": "member"}
    receiver = Receiver()
    made: dict[str, str] = {}
    with migrated_database("postgresql", tmp_path) as url:
        settings = stack.settings.model_copy(update={"database_url": url,
                                                     "webhook_secret_key_file": key_file})
        try:
            with TestClient(create_app(settings)) as api:
                answer = api.post("/v1/webhooks", json={"url": receiver.url}, headers=project)
                assert answer.status_code == 201, answer.text
                made[answer.json()["id"]] = answer.json()["secret"]
                _ring(key_file, OLD, NEW)  # 1: every process opens both
                _ring(key_file, NEW, OLD)  # 2: the running API seals under the new one
                answer = api.post("/v1/webhooks", json={"url": receiver.url}, headers=project)
                assert answer.status_code == 201, answer.text
                made[answer.json()["id"]] = answer.json()["secret"]
            shown = _manage(url, key_file, "keys")
            assert shown.returncode == 0, shown.stderr
            assert f"1 webhooks sealed under {sealing.key_id(OLD)}" in shown.stdout
            assert f"1 webhooks sealed under {sealing.key_id(NEW)}" in shown.stdout

            resealed = _manage(url, key_file, "reseal")  # 3
            assert resealed.returncode == 0, resealed.stderr
            assert f"resealed 1 webhooks under {sealing.key_id(NEW)}; 1 already" \
                in resealed.stdout
            _ring(key_file, NEW)  # 4
            assert _secrets(url, sealing.Keyring([NEW])) == made
            db = Database(url, pool_size=1)
            try:
                assert keys.check_at_start(db, settings, wait=0)
                _ring(key_file, OLD)
                with pytest.raises(WebhookKeyUnavailable, match=f"deployment's webhook key is "
                                                                f"{sealing.key_id(NEW)}"):
                    keys.check_at_start(db, settings, wait=0)
            finally:
                db.dispose()
        finally:
            receiver.close()


def test_reseal_names_what_opens_under_no_key_and_records_nothing(
        stack: Stack, tmp_path: Path) -> None:
    key_file = tmp_path / "secret.key"
    _ring(key_file, OLD)
    receiver = Receiver()
    with migrated_database("postgresql", tmp_path) as url:
        settings = stack.settings.model_copy(update={"database_url": url,
                                                     "webhook_secret_key_file": key_file})
        try:
            with TestClient(create_app(settings)) as api:
                answer = api.post("/v1/webhooks", json={"url": receiver.url},
                                  headers={"X-Project-Id": "lost", "X-Roles": "member"})
                assert answer.status_code == 201, answer.text
            _ring(key_file, NEW)  # the old key lost
            done = _manage(url, key_file, "reseal")
            assert done.returncode == 1
            assert answer.json()["id"] in done.stderr
            assert f"{sealing.key_id(NEW)} was not recorded" in done.stderr
            assert f"deployment's key: {sealing.key_id(OLD)}" in \
                _manage(url, key_file, "keys").stdout
        finally:
            receiver.close()
