"""A tenant aiming Cairn at internal services through DNS or the environment gets nowhere,
on a real worker whose resolver the test scripts (`tests/support/scripted_dns.py`, loaded
by the worker's sitecustomize) and whose allowlist does not hold loopback:
- a name that answers a public address first and loopback next (DNS rebinding) is never
  connected to on loopback: the attempt connects to the address it checked;
- a name that answers both at once is refused;
- HTTP_PROXY and the like in the worker's environment carry no delivery anywhere.
The "public" address stands for the internet: the scripted resolver refuses connections
to it, so no packet leaves the machine."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import scripted_dns
from tests.support.databases import migrated_database
from tests.support.stack import REPO, Stack, start_stack, stop_stack
from tests.support.webhook_receiver import Receiver
from tests.support.workers import RedisDb, redis_db

pytestmark = pytest.mark.production_database_only

REDIS_DB = redis_db(RedisDb.MODULE_STACK)
PUBLIC = "93.184.215.14"
"""A global address; the scripted resolver refuses connections to it."""


@pytest.fixture(scope="module")
def internal() -> Iterator[Receiver]:
    """An internal service on loopback: it counts every TCP connection it accepts."""
    found = Receiver()
    yield found
    found.close()


@pytest.fixture(scope="module")
def proxy() -> Iterator[Receiver]:
    """What HTTP_PROXY names in the worker's environment: a listener that counts."""
    found = Receiver()
    yield found
    found.close()


@pytest.fixture(scope="module")
def scripted_stack(internal: Receiver, proxy: Receiver,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory = tmp_path_factory.mktemp("rebinding")
    script = directory / "dns.json"
    script.write_text(json.dumps({
        "names": {"hooks.rebind.test": [[PUBLIC], ["127.0.0.1"]],
                  "hooks.mixed.test": [[PUBLIC, "127.0.0.1"]],
                  "hooks.proxied.test": [[PUBLIC]]},
        "refuse": [PUBLIC]}))
    proxy_url = f"http://127.0.0.1:{proxy.port}"
    with migrated_database("postgresql", directory) as url:
        stack = start_stack(
            url, REDIS_DB, directory / "logs",
            CAIRN_WEBHOOK_ALLOWED_NETWORKS="[]",
            PYTHONPATH=f"{scripted_dns.SITE}{os.pathsep}{REPO}",
            **{scripted_dns.SCRIPT_ENV: str(script)},
            HTTP_PROXY=proxy_url, HTTPS_PROXY=proxy_url, ALL_PROXY=proxy_url,
            http_proxy=proxy_url, https_proxy=proxy_url, all_proxy=proxy_url,
            # The rebinding name bypasses the proxy, so that a client that resolves it
            # again reaches loopback; local servers (RGW) stay direct.
            NO_PROXY="127.0.0.1,localhost,hooks.rebind.test",
            no_proxy="127.0.0.1,localhost,hooks.rebind.test")
        try:
            yield stack
        finally:
            stop_stack(stack)


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A project; the API (in this process) resolves the test's names to the public
    address only, as it would when the webhook is saved."""
    resolve, _connect = scripted_dns.scripted({"names": {
        name: [[PUBLIC]] for name in ("hooks.rebind.test", "hooks.mixed.test",
                                      "hooks.proxied.test")}})
    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return {"X-Project-Id": f"rebind-{uuid.uuid4().hex[:8]}", "X-Roles": "member"}


def _sent_until_failed(stack: Stack, headers: dict[str, str], url: str) -> dict[str, Any]:
    made = stack.post("/v1/webhooks", {"url": url, "event_types": ["webhook.test"]}, headers)
    assert made.status_code == 201, made.text
    hook = made.json()["id"]
    assert stack.post(f"/v1/webhooks/{hook}/test", {}, headers).status_code == 202
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        (delivery,) = stack.get(f"/v1/webhooks/{hook}/deliveries", headers).json()["deliveries"]
        if delivery["status"] != "pending":
            return dict(delivery)
        time.sleep(0.2)
    raise AssertionError(f"delivery still pending: {delivery}\n{stack.busy_with()}")


def test_a_name_that_rebinds_to_loopback_never_reaches_it(
        scripted_stack: Stack, internal: Receiver, project: dict[str, str]) -> None:
    for name in ("hooks.rebind.test", "hooks.mixed.test"):
        delivery = _sent_until_failed(scripted_stack, project,
                                      f"http://{name}:{internal.port}/hook")
        assert internal.connections == 0, f"{name}: a connection reached loopback"
        assert delivery["status"] == "failed", delivery
        assert delivery["attempts"] == 4, delivery  # the stack's webhook_max_attempts
        assert "127.0.0.1" not in delivery["last_error"], delivery
        assert PUBLIC not in delivery["last_error"], delivery


def test_proxy_variables_in_the_environment_carry_no_delivery(
        scripted_stack: Stack, proxy: Receiver, project: dict[str, str]) -> None:
    delivery = _sent_until_failed(scripted_stack, project, "http://hooks.proxied.test/hook")
    assert proxy.connections == 0, "a delivery went through the environment's proxy"
    assert delivery["status"] == "failed", delivery
    assert delivery["last_error"] == "connection refused", delivery  # the public address
