"""Keystone checks of tokens at the door: bounded in number and in time; taken in turns by
client; tokens Keystone validated before (or a sealed portal session's) in a lane garbage
never reaches; clients whose tokens Keystone keeps refusing stopped at once, and nobody
else for them; shared by the requests that bring the same token; a cached token never
waits, and one in use is rechecked before its cache time runs out."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from api.lanes import QUEUE_PER_CLIENT
from api.token_checks import Refusals, TokenChecks
from services.auth.keystone import TokenInfo, TokenValidator
from services.context import RequestContext
from services.errors import ServiceUnavailable, TooManyRequests, Unauthorized


def _info(token: str) -> TokenInfo:
    return TokenInfo(user_id="u-" + token, project_id="p-" + token, roles=frozenset(),
                     expires_at=datetime.now(UTC) + timedelta(hours=1), endpoints={})


class SlowKeystone:
    """A validator whose Keystone answers a token only once `answer` is set (tokens in
    `instant` at once); garbage-* tokens it refuses."""

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.instant: set[str] = set()
        self.cached = {"cached": _info("cached")}
        self.known_tokens = {"known": _info("known")}
        self.refused = {"refused"}
        self.due: set[str] = set()
        self.calls: list[str] = []
        self.rechecks: list[str] = []
        self.running = 0
        self.most_running = 0
        self._lock = threading.Lock()

    def cached_context(self, token: str, method: str, path: str) -> RequestContext | None:
        if token in self.refused:
            raise Unauthorized("the token is invalid")
        info = self.cached.get(token)
        return None if info is None else self.context_of(info, token, method, path)

    def known(self, token: str) -> TokenInfo | None:
        return self.known_tokens.get(token) or self.cached.get(token)

    def refresh_due(self, token: str) -> bool:
        return token in self.due

    def context_of(self, info: TokenInfo, token: str, method: str,
                   path: str) -> RequestContext:
        return RequestContext(project_id=info.project_id, user_id=info.user_id, token=token)

    def validate(self, token: str, *, recheck: bool = False) -> TokenInfo:
        with self._lock:
            self.calls.append(token)
            if recheck:
                self.rechecks.append(token)
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            if token not in self.instant:
                self.answer.wait(10)
            if token.startswith("garbage"):
                raise Unauthorized("the token is invalid")
            return _info(token)
        finally:
            with self._lock:
                self.running -= 1


GET, JOBS = "GET", "/v1/jobs"


def _checks(keystone: SlowKeystone, **bounds: Any) -> TokenChecks:
    return TokenChecks(cast(TokenValidator, keystone), **{
        "threads": 2, "per_client": 2, "refusals_per_client": 1000, "timeout": 5.0,
        **bounds})


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_a_cached_or_refused_token_is_decided_without_waiting() -> None:
    keystone = SlowKeystone()
    checks = _checks(keystone)

    async def scenario() -> float:
        stuck = [asyncio.ensure_future(checks.context(f"garbage-{i}", f"10.0.0.{i}", GET, JOBS))
                 for i in range(20)]
        await asyncio.sleep(0.05)
        started = time.monotonic()
        assert (await checks.context("cached", "10.0.0.1", GET, JOBS)).project_id == "p-cached"
        with pytest.raises(Unauthorized):
            await checks.context("refused", "10.0.0.1", GET, JOBS)
        took = time.monotonic() - started
        keystone.answer.set()
        await asyncio.gather(*stuck, return_exceptions=True)
        return took

    assert _run(scenario()) < 0.01
    checks.close()


def test_keystone_is_asked_about_at_most_threads_new_tokens_at_once() -> None:
    keystone = SlowKeystone()
    checks = _checks(keystone)

    async def scenario() -> list[Any]:
        waiting = [asyncio.ensure_future(checks.context(f"token-{i}", f"10.0.1.{i}", GET, JOBS))
                   for i in range(30)]
        await asyncio.sleep(0.2)
        assert keystone.running == 2
        keystone.answer.set()
        return await asyncio.gather(*waiting)

    found = _run(scenario())
    assert [c.project_id for c in found] == [f"p-token-{i}" for i in range(30)]
    assert keystone.most_running == 2
    checks.close()


def test_clients_take_turns_so_a_flood_delays_a_newcomer_by_one_check() -> None:
    keystone = SlowKeystone()
    checks = _checks(keystone, threads=1, per_client=1)

    async def scenario() -> None:
        flood = [asyncio.ensure_future(checks.context(f"garbage-{i}", "192.0.2.1", GET, JOBS))
                 for i in range(QUEUE_PER_CLIENT)]
        await asyncio.sleep(0.05)
        newcomer = asyncio.ensure_future(checks.context("token-new", "192.0.2.2", GET, JOBS))
        await asyncio.sleep(0.05)
        keystone.answer.set()
        assert (await newcomer).project_id == "p-token-new"
        await asyncio.gather(*flood, return_exceptions=True)

    _run(scenario())
    # The flood's first check was running, and its second queued, when the newcomer came:
    # one turn of the flood's, then the newcomer's. Before: one queue in arrival order, and
    # the newcomer came after the whole flood.
    assert keystone.calls.index("token-new") == 2, keystone.calls
    checks.close()


def test_waiting_tokens_refuse_nobody_only_a_full_queue_or_keystones_refusals_do() -> None:
    keystone = SlowKeystone()
    checks = _checks(keystone, threads=1, refusals_per_client=5)

    async def scenario() -> None:
        # Two garbage tokens in flight; a good new token from the same address waits its
        # turn (before: 429, the address had its two checks already).
        garbage = [asyncio.ensure_future(checks.context(f"garbage-{i}", "192.0.2.1", GET, JOBS))
                   for i in range(2)]
        await asyncio.sleep(0.05)
        good = asyncio.ensure_future(checks.context("token-good", "192.0.2.1", GET, JOBS))
        # Past the address's queue, a token is refused at once.
        more = [asyncio.ensure_future(checks.context(f"garbage-q{i}", "192.0.2.1", GET, JOBS))
                for i in range(QUEUE_PER_CLIENT)]
        await asyncio.sleep(0.05)
        keystone.answer.set()
        assert (await good).project_id == "p-token-good"
        results = await asyncio.gather(*garbage, *more, return_exceptions=True)
        throttled = sum(isinstance(r, TooManyRequests) for r in results)
        refused = sum(isinstance(r, Unauthorized) for r in results)
        # 3 of the queue's 32 places were taken: 3 of the 32 more refused at once; once
        # Keystone had refused 5, the others were answered 429 at their turn, uncalled.
        assert refused == 5, results
        assert throttled == 2 + QUEUE_PER_CLIENT - 5, results
        with pytest.raises(TooManyRequests):
            await checks.context("token-later", "192.0.2.1", GET, JOBS)
        # Another address, and a token Keystone validated before, are checked as ever.
        assert (await checks.context("token-other", "192.0.2.9", GET, JOBS)).project_id \
            == "p-token-other"
        assert (await checks.context("known", "192.0.2.1", GET, JOBS)).project_id == "p-known"

    _run(scenario())
    assert sum(call.startswith("garbage") for call in keystone.calls) == 5
    checks.close()


def test_a_known_tokens_recheck_never_waits_behind_new_tokens() -> None:
    keystone = SlowKeystone()
    keystone.instant = {"known", "session-token"}
    checks = _checks(keystone)

    async def scenario() -> float:
        flood = [asyncio.ensure_future(checks.context(f"garbage-{i}", f"10.0.4.{i}", GET, JOBS))
                 for i in range(200)]
        await asyncio.sleep(0.05)
        assert keystone.running == 2  # the lane of new clients is full
        started = time.monotonic()
        assert (await checks.context("known", "10.0.4.1", GET, JOBS)).project_id == "p-known"
        # A sealed portal session's token: Cairn vouches for it, whichever process saw it.
        assert (await checks.context("session-token", "10.0.4.1", GET, JOBS,
                                     vouched_for="p/alice")).project_id == "p-session-token"
        took = time.monotonic() - started
        keystone.answer.set()
        await asyncio.gather(*flood, return_exceptions=True)
        return took

    assert _run(scenario()) < 0.5
    checks.close()


def test_a_token_in_use_is_rechecked_before_its_cache_time_runs_out() -> None:
    keystone = SlowKeystone()
    keystone.due = {"cached"}
    checks = _checks(keystone)

    async def scenario() -> None:
        started = time.monotonic()
        for _ in range(5):
            assert (await checks.context("cached", "10.0.5.1", GET, JOBS)).project_id \
                == "p-cached"
        assert time.monotonic() - started < 0.05  # answered from the cache meanwhile
        keystone.answer.set()
        await asyncio.sleep(0.2)

    _run(scenario())
    assert keystone.rechecks == ["cached"]  # once, in the background
    checks.close()


def test_requests_with_the_same_new_token_share_one_check() -> None:
    keystone = SlowKeystone()
    checks = _checks(keystone, per_client=1)

    async def scenario() -> list[RequestContext]:
        same = [asyncio.ensure_future(checks.context("token-shared", "192.0.2.1", GET, JOBS))
                for _ in range(25)]
        await asyncio.sleep(0.05)
        keystone.answer.set()
        return await asyncio.gather(*same)

    assert {c.project_id for c in _run(scenario())} == {"p-token-shared"}
    assert keystone.calls == ["token-shared"]
    checks.close()


def test_a_check_keystone_does_not_answer_in_time_is_a_503_and_keeps_its_thread() -> None:
    keystone = SlowKeystone()
    checks = _checks(keystone, threads=1, timeout=0.2)

    async def scenario() -> None:
        with pytest.raises(ServiceUnavailable):
            await checks.context("token-late", "192.0.2.1", GET, JOBS)
        # The thread still waits for Keystone: the next token waits for it (no second
        # thread), and times out too.
        with pytest.raises(ServiceUnavailable):
            await checks.context("token-next", "192.0.2.1", GET, JOBS)
        assert keystone.most_running == 1
        keystone.answer.set()
        assert (await checks.context("token-after", "192.0.2.1", GET, JOBS)).project_id \
            == "p-token-after"

    _run(scenario())
    checks.close()


def test_checks_everyone_gave_up_on_never_reach_keystone() -> None:
    keystone = SlowKeystone()
    checks = _checks(keystone, threads=1, timeout=0.2)

    async def scenario() -> None:
        given_up = await asyncio.gather(
            *(checks.context(f"garbage-{i}", f"10.0.2.{i}", GET, JOBS) for i in range(50)),
            return_exceptions=True)
        assert all(isinstance(r, ServiceUnavailable) for r in given_up)
        keystone.answer.set()
        assert (await checks.context("token-fresh", "10.0.3.1", GET, JOBS)).project_id \
            == "p-token-fresh"

    _run(scenario())
    # The first flood token's thread was running when its waiter gave up; the other 49
    # were dropped from the queue when their waiters left.
    assert keystone.calls == ["garbage-0", "token-fresh"]
    checks.close()


def test_refusals_are_counted_per_client_for_a_minute() -> None:
    now = [1000.0]
    refusals = Refusals(3, now=lambda: now[0])
    for _ in range(2):
        refusals.add("192.0.2.1")
    assert refusals.refusal("192.0.2.1") is None
    refusals.add("192.0.2.1")
    refused = refusals.refusal("192.0.2.1")
    assert isinstance(refused, TooManyRequests)
    assert refused.retry_after == 60
    assert refusals.refusal("192.0.2.2") is None
    now[0] += 60
    assert refusals.refusal("192.0.2.1") is None
    refusals.add("192.0.2.1")
    assert refusals.refusal("192.0.2.1") is None  # a new window
