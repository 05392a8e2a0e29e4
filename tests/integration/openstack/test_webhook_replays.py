"""The replay of a webhook's creation (same Idempotency-Key, same body) answers its secret
to the user who created it and to nobody else of the project, with Keystone's real users:
project A's admin, who may create webhooks there too, holding A's member's key and body,
gets a 409, not the member's secret."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.support.openstack import Cloud, OpenStackCairn
from tests.support.webhook_receiver import Receiver


def _create(os_cairn: OpenStackCairn, token: str, key: str, body: dict[str, Any]
            ) -> httpx.Response:
    return httpx.post(f"{os_cairn.url}/v1/webhooks", json=body, timeout=60,
                      headers={"X-Auth-Token": token, "Idempotency-Key": key})


def test_a_creations_secret_is_replayed_to_its_creator_only(
        cloud: Cloud, os_cairn: OpenStackCairn) -> None:
    member, admin = cloud["a-member"].token(), cloud["a-admin"].token()
    receiver = Receiver()
    key = str(uuid.uuid4())
    body = {"url": receiver.url, "event_types": ["webhook.test"]}
    hook = None
    try:
        first = _create(os_cairn, member, key, body)
        assert first.status_code == 201, first.text
        hook = first.json()["id"]
        again = _create(os_cairn, member, key, body)
        assert again.status_code == 201, again.text
        assert again.json()["secret"] == first.json()["secret"]
        other = _create(os_cairn, admin, key, body)
        assert other.status_code == 409, other.text
        assert first.json()["secret"] not in other.text
        assert "another caller" in other.json()["error"]["message"]
        listed = os_cairn.call("GET", "/v1/webhooks", admin).json()["webhooks"]
        assert [found["id"] for found in listed].count(hook) == 1  # and made nothing
    finally:
        receiver.close()
        if hook is not None:
            os_cairn.call("DELETE", f"/v1/webhooks/{hook}", member)
