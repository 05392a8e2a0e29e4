"""The API's door while Keystone (and Cinder) answer slowly: a real cairn-api process with
Keystone auth, whose every connection to Keystone and Cinder passes the project's delay
line (tests/support/delay_line.py), so each token check takes over half a second. Floods of
garbage tokens cost the flooders, never `/healthz` or a tenant whose token is cached; a
portal user's slots are their own, wherever they come from; sign-ins are throttled per
client address; signing out ends the session even when Keystone cannot revoke it.

The process trusts 127.0.0.1 as a proxy (CAIRN_API_TRUSTED_PROXIES), so a request names its
client address in X-Forwarded-For: one test process plays many clients."""

from __future__ import annotations

import os
import secrets
import select
import socket
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.openstack.conftest import Protected
from tests.support.delay_line import delay_line
from tests.support.openstack import KEYSTONE_PORT, PASSWORD, Cloud, OpenStackCairn
from tests.support.stack import api_process

CINDER_PORT = int(os.environ.get("CAIRN_CINDER_PORT", "31776"))

DELAY = 0.3
"""One way, per byte: a token check (request out, answer back) takes over 0.6 s."""
FLOOD = 300
BUDGET = 0.1
"""What the acceptance line allows /healthz and a cached tenant's list during a flood."""


@pytest.fixture(scope="module")
def slow_cairn(os_cairn: OpenStackCairn, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("slow-keystone")
    with delay_line([KEYSTONE_PORT, CINDER_PORT], DELAY, directory) as line:
        env = {**os_cairn.env, **line.env,
               # Production's cache time: a tenant's token stays trusted through the flood.
               "CAIRN_TOKEN_CACHE_SECONDS": "60",
               "CAIRN_API_TRUSTED_PROXIES": '["127.0.0.1/32"]'}
        with api_process(env, directory / "api.log") as address:
            yield address


def _cookie(response: httpx.Response) -> str:
    """The session cookie as a Cookie header's value: sent by hand, since a client's cookie
    jar keeps a Secure cookie away from http://127.0.0.1 (a browser does not)."""
    for header in response.headers.get_list("set-cookie"):
        name_value = header.split(";", 1)[0]
        if name_value.split("=", 1)[0] in ("__Host-cairn_session", "cairn_session"):
            return name_value
    raise AssertionError(f"no session cookie in {response.headers}")


def _sign_in(base: str, user: str, address: str | None = None) -> tuple[str, str]:
    """A portal session of `user`, signed in from `address`: (Cookie value, CSRF token)."""
    signed = httpx.post(f"{base}/v1/session", timeout=60,
                        headers={"X-Forwarded-For": address} if address else {},
                        json={"domain": "Default", "username": user, "password": PASSWORD})
    assert signed.status_code == 200, signed.text
    return _cookie(signed), signed.json()["csrf_token"]


class Flood:
    """`count` requests at once on connections of their own, sent before the constructor
    returns, and read afterwards. By default each carries a garbage token of its own (and,
    with `addresses`, comes from a client address of its own)."""

    def __init__(self, address: str, count: int, *, addresses: bool = False,
                 path: str = "/v1/restore-points", headers: str | None = None) -> None:
        host, port = address.split(":")
        self.conns: list[socket.socket] = []
        for i in range(count):
            conn = socket.create_connection((host, int(port)))
            sent = headers if headers is not None \
                else f"X-Auth-Token: gAAAAA{secrets.token_urlsafe(135)}\r\n"
            if addresses:
                sent += f"X-Forwarded-For: 198.18.{i // 200}.{i % 200 + 1}\r\n"
            conn.sendall(f"GET {path} HTTP/1.1\r\nHost: cairn\r\n{sent}"
                         "Connection: close\r\n\r\n".encode())
            self.conns.append(conn)
        self.sent = time.monotonic()

    def first_answer(self, within: float) -> float:
        """Seconds until the first request is answered (its answer is left to `statuses`)."""
        ready, _, _ = select.select(self.conns, [], [], within)
        assert ready, f"no answer within {within} s"
        return time.monotonic() - self.sent

    def statuses(self, within: float) -> Counter[str]:
        """Each request's status (or 'unanswered'), waiting up to `within` seconds."""
        found: Counter[str] = Counter()
        waiting = dict.fromkeys(self.conns, b"")
        deadline = time.monotonic() + within
        while waiting and time.monotonic() < deadline:
            ready, _, _ = select.select(list(waiting), [], [], 0.5)
            for conn in ready:
                chunk = conn.recv(64)
                waiting[conn] += chunk
                if b"\r\n" in waiting[conn] or not chunk:
                    found[waiting.pop(conn).split(b" ", 2)[1].decode() or "closed"] += 1
        found["unanswered"] += len(waiting)
        for conn in self.conns:
            conn.close()
        return found


def _timed(client: httpx.Client, path: str, headers: dict[str, str]) -> float:
    started = time.monotonic()
    try:
        answer = client.get(path, headers=headers)
    except httpx.TimeoutException:
        return float("inf")
    assert answer.status_code == 200, (path, answer.status_code, answer.text[:200])
    return time.monotonic() - started


def _figures(times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    return (f"p50 {statistics.median(ordered) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
            f"max {ordered[-1] * 1000:.1f} ms over {len(ordered)}")


def test_garbage_tokens_leave_healthz_and_a_cached_tenant_fast(
        cloud: Cloud, slow_cairn: str, protected: Protected) -> None:
    """The acceptance line: 300 requests with distinct garbage tokens, from 300 client
    addresses, while Keystone answers slowly, leave /healthz and a cached tenant's list
    under 100 ms. Before, each garbage token held a process slot while Keystone was asked
    about it: /healthz and every tenant waited seconds behind them."""
    tenant = {"X-Auth-Token": cloud["a-member"].token()}
    healthz, listed = [], []
    with httpx.Client(base_url=f"http://{slow_cairn}", timeout=5) as client:
        warm = client.get("/v1/restore-points", headers=tenant)  # validated once, then cached
        assert warm.status_code == 200, warm.text
        assert protected.restore_point_id in warm.text
        _timed(client, "/healthz", {})
        flood = Flood(slow_cairn, FLOOD, addresses=True)
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and len(healthz) < 40:
            healthz.append(_timed(client, "/healthz", {}))
            listed.append(_timed(client, "/v1/restore-points", tenant))
            time.sleep(0.05)
        statuses = flood.statuses(within=20)
    print(f"\nduring {FLOOD} garbage tokens: /healthz {_figures(healthz)}; "
          f"a cached tenant's list {_figures(listed)}; the flood got {dict(statuses)}")
    # The line, for nineteen probes in twenty; and no probe waited on the flood (that
    # was seconds: a garbage token's Keystone check ahead of it). Measured on a 2-core
    # machine running other test sessions: p50 4 ms, p95 13-56 ms, max 26-78 ms.
    assert len(healthz) >= 20, "probes timed out"
    for times in (healthz, listed):
        assert sorted(times)[int(len(times) * 0.95) - 1] < BUDGET, _figures(times)
        assert max(times) < 3 * BUDGET, _figures(times)
    # The flood was answered: refused (401) once checked, or 503 when the check did not
    # come in time; nothing was let through, nothing was left hanging.
    assert set(statuses) <= {"401", "503", "unanswered"}, statuses
    assert statuses["unanswered"] == 0, statuses
    assert statuses["401"] >= 4, statuses


def test_one_clients_garbage_tokens_beyond_its_share_are_refused_at_once(
        slow_cairn: str) -> None:
    """From one address, only `api_token_checks_per_client` (2) unknown tokens wait for
    Keystone; the rest are answered 429 at once, without a Keystone call. Before, each was
    a Keystone call holding a slot."""
    flood = Flood(slow_cairn, 100, addresses=False)
    statuses = flood.statuses(within=1.0)
    answered_in = time.monotonic() - flood.sent
    print(f"\n100 garbage tokens from one address: {dict(statuses)}")
    assert statuses["429"] >= 95, statuses
    assert answered_in < 5, answered_in
    with httpx.Client(base_url=f"http://{slow_cairn}", timeout=5) as client:
        assert client.get("/healthz").status_code == 200


def test_portal_users_behind_one_proxy_each_have_their_own_slots(
        cloud: Cloud, slow_cairn: str) -> None:
    """Two portal users whose requests come through the same proxy address: one keeps
    all its slots busy with slow requests (volume lists that wait on Cinder) and more
    waiting, the other is served at once. Before, every cookie user of one address was one
    client: the second waited behind the first's queue."""
    office = "203.0.113.10"
    busy, _ = _sign_in(f"http://{slow_cairn}", "a-member", office)
    other, _ = _sign_in(f"http://{slow_cairn}", "a-reader", office)
    headers = {"X-Forwarded-For": office}
    with httpx.Client(base_url=f"http://{slow_cairn}", timeout=30, headers=headers) as client:
        assert client.get("/v1/restore-points", headers={"Cookie": other}).status_code == 200
        assert client.get("/v1/volumes", headers={"Cookie": busy}).status_code == 200
        # Fifteen volume lists, each waiting on Cinder: five run, ten wait for them. Once
        # the first is answered, every one of them is inside the server.
        slow = Flood(slow_cairn, 15, path="/v1/volumes",
                     headers=f"Cookie: {busy}\r\nX-Forwarded-For: {office}\r\n")
        first = slow.first_answer(within=30)
        started = time.monotonic()
        answer = client.get("/v1/restore-points", headers={"Cookie": other})
        waited = time.monotonic() - started
        assert answer.status_code == 200, answer.text
        busy_for = slow.statuses(within=60)
        assert busy_for == {"200": 15, "unanswered": 0}, busy_for
        assert first > 2 * DELAY, "the volume lists were not slow"
    print(f"\nthe other portal user waited {waited * 1000:.0f} ms")
    assert waited < 0.5, waited


def test_sign_ins_are_throttled_per_client_address(cloud: Cloud, slow_cairn: str) -> None:
    base = f"http://{slow_cairn}"
    guessing = {"X-Forwarded-For": "203.0.113.77"}
    for _ in range(5):
        wrong = httpx.post(f"{base}/v1/session", headers=guessing, timeout=60, json={
            "username": "a-member", "password": "guess"})
        assert wrong.status_code == 401, wrong.text
    # Before: a sixth guess, and a sixth thousand, went to Keystone.
    refused = httpx.post(f"{base}/v1/session", headers=guessing, timeout=60, json={
        "username": "a-member", "password": PASSWORD})
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["retry-after"]) > 60
    # The user is not locked out: from another address, or as another user, sign-in works.
    _sign_in(base, "a-member", "203.0.113.78")
    other_user = httpx.post(f"{base}/v1/session", headers=guessing, timeout=60, json={
        "username": "a-reader", "password": PASSWORD})
    assert other_user.status_code == 200, other_user.text
    # Attempts of any kind are counted too: 20 a minute.
    hurried = {"X-Forwarded-For": "203.0.113.79"}
    statuses = [httpx.post(f"{base}/v1/session", headers=hurried, timeout=60,
                           json={"username": "a-member"}).status_code for _ in range(21)]
    assert statuses == [422] * 20 + [429], statuses


def test_signing_out_ends_the_session_even_when_keystone_cannot_revoke_it(
        os_cairn: OpenStackCairn, tmp_path: Path) -> None:
    """Keystone becomes unreachable after sign-in. Before: sign-out answered 204 as if all
    was done, and a copy of the cookie went on working (its token stayed in the cache, and
    Keystone still honours it). Now the answer says Keystone kept the tokens, and no API
    process of the deployment accepts the session again."""
    key = tmp_path / "portal.key"
    key.write_text(secrets.token_hex(32))
    shared = {**os_cairn.env, "CAIRN_TOKEN_CACHE_SECONDS": "60",
              "CAIRN_PORTAL_SESSION_KEY_FILE": str(key)}
    with delay_line([KEYSTONE_PORT], 0.0, tmp_path) as line, \
            api_process({**shared, **line.env}, tmp_path / "api-1.log") as first, \
            api_process(shared, tmp_path / "api-2.log") as second:
        cookie, csrf = _sign_in(f"http://{first}", "a-member")
        for address in (first, second):
            assert httpx.get(f"http://{address}/v1/jobs", headers={"Cookie": cookie},
                             timeout=30).status_code == 200
        line.cut()  # the first process cannot reach Keystone any more
        out = httpx.delete(f"http://{first}/v1/session", timeout=60,
                           headers={"Cookie": cookie, "X-CSRF-Token": csrf})
        assert out.status_code == 200, out.text
        said = out.json()
        assert said == {**said, "tokens_revoked": False, "ended_everywhere": True}, said
        assert "stay valid at Keystone" in said["message"]
        assert "__Host-cairn_session=\"\"" in out.headers["set-cookie"] \
            or "__Host-cairn_session=;" in out.headers["set-cookie"], out.headers
        for address in (first, second):
            replay = httpx.get(f"http://{address}/v1/jobs", headers={"Cookie": cookie},
                               timeout=30)
            assert replay.status_code == 401, (address, replay.text)
