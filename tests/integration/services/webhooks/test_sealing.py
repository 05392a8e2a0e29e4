"""cairn-api and cairn-worker refuse to start when webhooks exist and the key their
secrets are sealed under is missing or another, saying which setting to fix, instead of
failing every delivery later."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from services.webhooks.sealing import WebhookKeyUnavailable
from tests.support.stack import BIN, REPO, Stack
from tests.support.webhook_receiver import Receiver

pytestmark = pytest.mark.production_database_only


@pytest.fixture
def a_webhook(stack: Stack) -> None:
    receiver = Receiver()
    try:
        made = stack.post("/v1/webhooks", {"url": receiver.url},
                          {"X-Project-Id": f"keyed-{uuid.uuid4().hex[:8]}", "X-Roles": "member"})
        assert made.status_code == 201, made.text
    finally:
        receiver.close()


def _worker(stack: Stack) -> subprocess.CompletedProcess[str]:
    given = {k: v for k, v in {**os.environ, **stack.env}.items()
             if k != "CAIRN_WEBHOOK_SECRET_KEY_FILE"}
    return subprocess.run([str(BIN / "cairn-worker")], env=given, cwd=REPO,
                          capture_output=True, text=True, timeout=30, check=False)


def test_a_worker_without_the_key_does_not_start(stack: Stack, a_webhook: None) -> None:
    missing = _worker(stack)
    assert missing.returncode != 0
    assert "CAIRN_WEBHOOK_SECRET_KEY_FILE, which is not set" in missing.stderr, missing.stderr


def test_an_api_without_the_key_or_with_another_does_not_start(
        stack: Stack, a_webhook: None, tmp_path: Path) -> None:
    keyless = stack.settings.model_copy(update={"webhook_secret_key_file": None})
    with pytest.raises(WebhookKeyUnavailable, match="CAIRN_WEBHOOK_SECRET_KEY_FILE, which is "
                                                    "not set"), TestClient(create_app(keyless)):
        pass
    other = tmp_path / "other.key"
    other.write_text("cd" * 32)
    wrong = stack.settings.model_copy(update={"webhook_secret_key_file": other})
    with pytest.raises(WebhookKeyUnavailable, match="not the key they were sealed with"), \
            TestClient(create_app(wrong)):
        pass
