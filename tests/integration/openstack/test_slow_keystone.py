"""The API's door while Keystone (and Cinder) answer slowly: a real cairn-api process with
Keystone auth, whose every connection to Keystone and Cinder passes the project's delay
line (tests/support/delay_line.py), so each token check takes over half a second. Floods of
garbage tokens cost the flooders, never `/healthz` or a tenant whose token is cached; a
portal user's slots are their own, wherever they come from; sign-ins are throttled per
client address; signing out ends the session even when Keystone cannot revoke it.

Credentials are read once, at the door: a request repeating its token is refused there.
Sign-ins hold no slot while Keystone takes its time; a tenant whose cache time ran out is
rechecked ahead of any flood; one address's garbage tokens delay nobody else's tokens.

The process trusts 127.0.0.1 as a proxy (CAIRN_API_TRUSTED_PROXIES), so a request names its
client address in X-Forwarded-For: one test process plays many clients."""

from __future__ import annotations

import json
import os
import secrets
import select
import socket
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from services.auth.portal_sessions import SessionSeal
from tests.integration.openstack.conftest import Protected
from tests.support.delay_line import delay_line
from tests.support.openstack import KEYSTONE, KEYSTONE_PORT, PASSWORD, Cloud, OpenStackCairn
from tests.support.stack import api_process

# Its figures are timings (the acceptance line's 100 ms during a flood): alone on the machine.
pytestmark = pytest.mark.serial

CINDER_PORT = int(os.environ.get("CAIRN_CINDER_PORT", "31776"))

DELAY = 0.3
"""One way, per byte: a token check (request out, answer back) takes over 0.6 s."""
FLOOD = 300
BUDGET = 0.1
"""What the acceptance line allows /healthz and a cached tenant's list during a flood."""
REFUSALS = 10
"""CAIRN_API_TOKEN_REFUSALS_PER_CLIENT of the slow process."""


@pytest.fixture(scope="module")
def slow_cairn(os_cairn: OpenStackCairn, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("slow-keystone")
    with delay_line([KEYSTONE_PORT, CINDER_PORT], DELAY, directory) as line:
        env = {**os_cairn.env, **line.env,
               # Production's cache time: a tenant's token stays trusted through the flood.
               "CAIRN_TOKEN_CACHE_SECONDS": "60",
               "CAIRN_API_TOKEN_REFUSALS_PER_CLIENT": str(REFUSALS),
               "CAIRN_API_TRUSTED_PROXIES": '["127.0.0.1/32"]'}
        with api_process(env, directory / "api.log") as address:
            yield address


@pytest.fixture(scope="module")
def rechecking_cairn(os_cairn: OpenStackCairn, tmp_path_factory: pytest.TempPathFactory
                     ) -> Iterator[str]:
    """As `slow_cairn`, but with no cache time: every request of a tenant is the recheck
    of a token Keystone validated before, as each is once a minute in production."""
    directory = tmp_path_factory.mktemp("rechecking")
    with delay_line([KEYSTONE_PORT], DELAY, directory) as line:
        env = {**os_cairn.env, **line.env, "CAIRN_TOKEN_CACHE_SECONDS": "0",
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


def garbage_token(i: int) -> str:
    return f"X-Auth-Token: gAAAAA{secrets.token_urlsafe(135)}\r\n"


def sign_in_request(user: str, password: str = "wrong") -> bytes:
    body = json.dumps({"domain": "Default", "username": user, "password": password}).encode()
    return (b"POST /v1/session HTTP/1.1\r\nHost: cairn\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))


class Flood:
    """`count` requests at once on connections of their own, sent before the constructor
    returns, and read afterwards. By default each carries a garbage token of its own (and,
    with `addresses`, comes from a client address of its own; with `address`, all from
    that one)."""

    def __init__(self, address: str, count: int, *, addresses: bool = False,
                 path: str = "/v1/restore-points",
                 headers: str | Callable[[int], str] = garbage_token,
                 client: str | None = None,
                 request: Callable[[int], bytes] | None = None) -> None:
        host, port = address.split(":")
        self.conns: list[socket.socket] = []
        for i in range(count):
            conn = socket.create_connection((host, int(port)))
            sent = headers(i) if callable(headers) else headers
            if addresses:
                sent += f"X-Forwarded-For: 198.18.{i // 200}.{i % 200 + 1}\r\n"
            elif client is not None:
                sent += f"X-Forwarded-For: {client}\r\n"
            if request is not None:
                head, rest = request(i).split(b"\r\n", 1)
                conn.sendall(head + b"\r\n" + sent.encode() + rest)
            else:
                conn.sendall(f"GET {path} HTTP/1.1\r\nHost: cairn\r\n{sent}"
                             "Connection: close\r\n\r\n".encode())
            self.conns.append(conn)
        self.sent = time.monotonic()
        self.found: Counter[str] = Counter()
        self._waiting = dict.fromkeys(self.conns, b"")

    def first_answer(self, within: float) -> float:
        """Seconds until the first request is answered (its answer is left to `statuses`)."""
        ready, _, _ = select.select(self.conns, [], [], within)
        assert ready, f"no answer within {within} s"
        return time.monotonic() - self.sent

    def answered(self, within: float) -> Counter[str]:
        """Each status answered so far, waiting up to `within` seconds for the rest."""
        deadline = time.monotonic() + within
        while self._waiting:
            left = deadline - time.monotonic()
            ready, _, _ = select.select(list(self._waiting), [], [], max(0.0, min(0.5, left)))
            for conn in ready:
                try:
                    chunk = conn.recv(64)
                except ConnectionResetError:
                    chunk = b""
                self._waiting[conn] += chunk
                if b"\r\n" in self._waiting[conn] or not chunk:
                    status = self._waiting.pop(conn).split(b" ", 2)
                    self.found[status[1].decode() if len(status) > 1 else "closed"] += 1
            if left <= 0:
                break
        return self.found.copy()

    def done(self) -> bool:
        """Every request is answered (reads what has come)."""
        self.answered(within=0)
        return not self._waiting

    def statuses(self, within: float) -> Counter[str]:
        """Each request's status (or 'unanswered'), waiting up to `within` seconds."""
        found = self.answered(within)
        found["unanswered"] += len(self._waiting)
        self.close()
        return found

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


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


def _cached_tenant(base: str, user: str, cloud: Cloud) -> dict[str, str]:
    """A new token of `user`'s, validated (and cached) by one request."""
    tenant = {"X-Auth-Token": cloud[user].token()}
    assert httpx.get(f"http://{base}/v1/restore-points", headers=tenant,
                     timeout=30).status_code == 200
    return tenant


def _probe_list(base: str, tenant: dict[str, str], until: Callable[[], bool],
                within: float = 30) -> list[float]:
    """The cached tenant's list times, probed until `until()` (or `within` seconds)."""
    listed: list[float] = []
    deadline = time.monotonic() + within
    with httpx.Client(base_url=f"http://{base}", timeout=10) as client:
        while time.monotonic() < deadline and (len(listed) < 5 or not until()):
            listed.append(_timed(client, "/v1/restore-points", tenant))
            time.sleep(0.05)
    return listed


def test_a_repeated_token_header_is_refused_at_the_door(cloud: Cloud, slow_cairn: str) -> None:
    """A garbage token followed by an empty X-Auth-Token header: before, the door read the
    last (none: an anonymous request) and the route the first, which it then checked with
    Keystone from inside a process slot, uncounted (18 of them from three addresses made a
    cached tenant's list take 4 s). Now the door refuses a repeated credential at once."""
    tenant = _cached_tenant(slow_cairn, "a-member", cloud)
    flood = Flood(slow_cairn, 40, addresses=True,
                  headers=lambda i: garbage_token(i) + "X-Auth-Token: \r\n")
    listed = _probe_list(slow_cairn, tenant, flood.done)
    statuses = flood.statuses(within=10)
    answered_in = time.monotonic() - flood.sent
    print(f"\n40 repeated tokens: {dict(statuses)} in {answered_in:.1f} s; a cached tenant's "
          f"list {_figures(listed)}")
    assert statuses == {"400": 40, "unanswered": 0}, statuses
    assert max(listed) < 3 * BUDGET, _figures(listed)
    # The portal's cookie and the project header count once too.
    for repeated in ({"Cookie": "a=1"}, {"X-Project-Id": "x"}):
        name, value = next(iter(repeated.items()))
        answer = httpx.get(f"http://{slow_cairn}/v1/jobs", timeout=10,
                           headers=[("X-Auth-Token", tenant["X-Auth-Token"]), (name, value),
                                    (name, value)])
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == "repeated_header"


def test_one_clients_garbage_tokens_delay_its_own_only(cloud: Cloud, slow_cairn: str) -> None:
    """From one address: tokens beyond its queue (32) are answered 429 at once; tokens in it
    wait their turn, and refuse nobody. Before, two garbage tokens in flight from an
    address made a member's good new token from that address a 429. Once Keystone has
    refused `REFUSALS` of an address's tokens within a minute, its new ones are refused at
    once (429), and no other address's."""
    flood = Flood(slow_cairn, 100, client="203.0.113.40")
    beyond = flood.answered(within=1.0)
    assert beyond["429"] >= 100 - 32, beyond
    flood.close()
    # Two garbage tokens in flight, then a good token new to the process.
    two = Flood(slow_cairn, 2, client="203.0.113.41")
    good = httpx.get(f"http://{slow_cairn}/v1/jobs", timeout=30, headers={
        "X-Auth-Token": cloud["a-member"].token(), "X-Forwarded-For": "203.0.113.41"})
    assert good.status_code == 200, good.text
    assert two.statuses(within=15) == {"401": 2, "unanswered": 0}
    # An address whose tokens Keystone keeps refusing.
    refused = Flood(slow_cairn, REFUSALS, client="203.0.113.42")
    assert refused.statuses(within=30) == {"401": REFUSALS, "unanswered": 0}
    started = time.monotonic()
    again = Flood(slow_cairn, 5, client="203.0.113.42").statuses(within=5)
    assert again == {"429": 5, "unanswered": 0}, again
    assert time.monotonic() - started < 2 * DELAY  # no Keystone call
    other = httpx.get(f"http://{slow_cairn}/v1/jobs", timeout=30, headers={
        "X-Auth-Token": cloud["a-reader"].token(), "X-Forwarded-For": "203.0.113.43"})
    assert other.status_code == 200, other.text


def test_a_tenant_whose_cache_time_ran_out_is_rechecked_ahead_of_any_flood(
        cloud: Cloud, rechecking_cairn: str) -> None:
    """300 garbage tokens from 300 addresses fill the Keystone lane for new tokens; a
    tenant's token, validated before, is rechecked in a lane of its own and answered in
    about one Keystone round trip. Before, all unknown tokens shared one queue: the tenant's
    recheck waited behind the flood (6 s, or a 503 after 10 s)."""
    tenant = {"X-Auth-Token": cloud["a-member"].token()}
    with httpx.Client(base_url=f"http://{rechecking_cairn}", timeout=30) as client:
        assert client.get("/v1/jobs", headers=tenant).status_code == 200  # validated once
        flood = Flood(rechecking_cairn, FLOOD, addresses=True)
        try:
            flood.first_answer(within=10)  # the flood is inside: Keystone answers it
            started = time.monotonic()
            answer = client.get("/v1/jobs", headers=tenant)
            waited = time.monotonic() - started
        finally:
            flood.close()
    print(f"\nthe tenant's recheck during {FLOOD} garbage tokens took {waited:.2f} s")
    assert answer.status_code == 200, answer.text
    # A new connection and a round trip to Keystone through the line (measured 1.6-1.9 s
    # on a busy machine); behind the flood it would be 300 checks, four at a time.
    assert waited < 5, waited


def test_sign_ins_against_a_slow_keystone_hold_no_slot(cloud: Cloud, slow_cairn: str) -> None:
    """Twenty wrong sign-ins from four addresses, each a Keystone call through the delay
    line. Before, each held one of the process's ten slots for its Keystone calls: a cached
    tenant's list waited behind them (7.4 s against a Keystone taking 5 s). Now they run in
    the Keystone lane of new clients, and the tenant is served at once."""
    tenant = _cached_tenant(slow_cairn, "a-member", cloud)
    sign_ins = [Flood(slow_cairn, 5, client=f"203.0.113.{90 + a}", headers="",
                      request=lambda i, a=a: sign_in_request(f"nobody-{a}-{i}"))
                for a in range(4)]
    listed = _probe_list(
        slow_cairn, tenant, lambda: sum(flood.done() for flood in sign_ins) == len(sign_ins))
    statuses = sum((flood.statuses(within=30) for flood in sign_ins), Counter())
    print(f"\n20 slow sign-ins: {dict(statuses)}; a cached tenant's list {_figures(listed)}")
    assert statuses == {"401": 20}, statuses
    assert max(listed) < 3 * BUDGET, _figures(listed)


def test_guesses_sent_at_once_count_before_keystone_answers(slow_cairn: str) -> None:
    """Eight wrong passwords for one user, sent at once from one address: five reach
    Keystone, three are refused. Before, each was counted once Keystone had answered, so all
    eight passed the check."""
    guesses = Flood(slow_cairn, 8, client="203.0.113.95", headers="",
                    request=lambda i: sign_in_request("a-member"))
    statuses = guesses.statuses(within=30)
    assert statuses == {"401": 5, "429": 3, "unanswered": 0}, statuses


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


def _tokens(cookie: str, key: Path) -> tuple[str, str]:
    """The (project-scoped, unscoped) tokens a session cookie holds, opened with its key."""
    session = SessionSeal(bytes.fromhex(key.read_text().strip())).open(
        cookie.split("=", 1)[1], datetime.now(UTC))
    assert session is not None
    assert session.token is not None
    assert session.unscoped is not None
    return session.token, session.unscoped


def _at_keystone(method: str, token: str) -> int:
    """Keystone's answer about `token`, asked with the token itself: 200 (or 204) while it
    is valid."""
    return httpx.request(method, f"{KEYSTONE}/auth/tokens", timeout=30, headers={
        "X-Auth-Token": token, "X-Subject-Token": token}).status_code


def test_signing_out_ends_the_session_even_when_keystone_cannot_revoke_it(
        os_cairn: OpenStackCairn, tmp_path: Path) -> None:
    """Keystone becomes unreachable after sign-in. Before: sign-out answered 204 as if all
    was done, and a copy of the cookie went on working (its token stayed in the cache, and
    Keystone still honours it). Now the answer says Keystone kept the tokens, and no API
    process of the deployment accepts the session again. Signing out needs the session
    only: before, a process that had to check its token first answered 503 while Keystone
    was down, and 401 once its project token was revoked (its other token stayed valid)."""
    key = tmp_path / "portal.key"
    key.write_text(secrets.token_hex(32))
    shared = {**os_cairn.env, "CAIRN_TOKEN_CACHE_SECONDS": "60",
              "CAIRN_PORTAL_SESSION_KEY_FILE": str(key)}
    with delay_line([KEYSTONE_PORT], 0.0, tmp_path) as line, \
            api_process({**shared, **line.env}, tmp_path / "api-1.log") as first, \
            api_process(shared, tmp_path / "api-2.log") as second:
        # A session whose project token was revoked meanwhile, signed out on a process that
        # never checked it: the session ends and its unscoped token is revoked too.
        revoked, revoked_csrf = _sign_in(f"http://{second}", "a-reader")
        scoped, unscoped = _tokens(revoked, key)
        assert _at_keystone("DELETE", scoped) == 204
        out = httpx.delete(f"http://{first}/v1/session", timeout=60,
                           headers={"Cookie": revoked, "X-CSRF-Token": revoked_csrf})
        assert out.status_code == 200, out.text
        assert out.json() == {**out.json(), "tokens_revoked": True,
                              "ended_everywhere": True}, out.text
        assert _at_keystone("GET", unscoped) in (401, 404)

        cookie, csrf = _sign_in(f"http://{first}", "a-member")
        unseen, unseen_csrf = _sign_in(f"http://{second}", "a-member")  # new to `first`
        for address in (first, second):
            assert httpx.get(f"http://{address}/v1/jobs", headers={"Cookie": cookie},
                             timeout=30).status_code == 200
        line.cut()  # the first process cannot reach Keystone any more
        for signed_in, token in ((cookie, csrf), (unseen, unseen_csrf)):
            out = httpx.delete(f"http://{first}/v1/session", timeout=60,
                               headers={"Cookie": signed_in, "X-CSRF-Token": token})
            assert out.status_code == 200, out.text
            said = out.json()
            assert said == {**said, "tokens_revoked": False, "ended_everywhere": True}, said
            assert "stay valid at Keystone" in said["message"]
            assert "__Host-cairn_session=\"\"" in out.headers["set-cookie"] \
                or "__Host-cairn_session=;" in out.headers["set-cookie"], out.headers
            for address in (first, second):
                replay = httpx.get(f"http://{address}/v1/jobs", headers={"Cookie": signed_in},
                                   timeout=30)
                assert replay.status_code == 401, (address, replay.text)
