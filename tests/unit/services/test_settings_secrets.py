"""Cairn's Keystone password is a secret: it reaches Keystone and nothing else (no repr,
log line or settings dump shows it)."""

from __future__ import annotations

import json

from services.openstack.sessions import service_session
from services.settings import KeystoneSettings, Settings


def test_the_service_password_never_shows_and_still_signs_in() -> None:
    keystone = KeystoneSettings(auth_url="http://keystone:5000/v3", username="cairn",
                                password="hunter2-secret")
    settings = Settings(auth_strategy="keystone", keystone=keystone)
    for shown in (repr(settings), str(keystone), settings.model_dump_json(),
                  json.dumps(keystone.model_dump(mode="json"))):
        assert "hunter2-secret" not in shown
    method = service_session(keystone).auth.auth_methods[0]
    assert (method.username, method.password) == ("cairn", "hunter2-secret")
