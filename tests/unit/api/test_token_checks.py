"""Keystone checks of unknown tokens at the door: bounded in number, per client address and
in time; shared by the requests that bring the same token; a cached token never waits."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, cast

import pytest

from api.callers import TokenChecks
from services.auth.keystone import TokenValidator
from services.context import RequestContext
from services.errors import ServiceUnavailable, TooManyRequests, Unauthorized


class SlowKeystone:
    """A validator whose Keystone answers only when `answer` is set."""

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.known = {"cached": RequestContext(project_id="p-cached", user_id="u1")}
        self.refused = {"refused"}
        self.calls: list[str] = []
        self.running = 0
        self.most_running = 0
        self._lock = threading.Lock()

    def cached_context(self, token: str, method: str, path: str) -> RequestContext | None:
        if token in self.refused:
            raise Unauthorized("the token is invalid")
        return self.known.get(token)

    def context_of(self, info: RequestContext, token: str, method: str,
                   path: str) -> RequestContext:
        return info

    def validate(self, token: str) -> RequestContext:
        with self._lock:
            self.calls.append(token)
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            self.answer.wait(10)
            if token.startswith("garbage"):
                raise Unauthorized("the token is invalid")
            return RequestContext(project_id="p-" + token, user_id="u-" + token)
        finally:
            with self._lock:
                self.running -= 1


GET, JOBS = "GET", "/v1/jobs"


def _checks(keystone: SlowKeystone, **bounds: Any) -> TokenChecks:
    return TokenChecks(cast(TokenValidator, keystone), **{
        "concurrency": 2, "per_client": 3, "timeout": 5.0, **bounds})


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_a_cached_or_refused_token_is_decided_without_waiting() -> None:
    keystone = SlowKeystone()
    checks = _checks(keystone, per_client=50)

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


def test_keystone_is_asked_about_at_most_concurrency_tokens_at_once() -> None:
    keystone = SlowKeystone()
    checks = _checks(keystone, per_client=100)

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


def test_one_client_address_may_have_only_its_share_of_checks_waiting() -> None:
    keystone = SlowKeystone()
    checks = _checks(keystone, per_client=3)

    async def scenario() -> tuple[int, int]:
        attempts = [asyncio.ensure_future(checks.context(f"garbage-{i}", "192.0.2.1", GET, JOBS))
                    for i in range(300)]
        await asyncio.sleep(0.1)
        other = asyncio.ensure_future(checks.context("token-other", "192.0.2.2", GET, JOBS))
        keystone.answer.set()
        results = await asyncio.gather(*attempts, return_exceptions=True)
        assert (await other).project_id == "p-token-other"
        throttled = sum(isinstance(r, TooManyRequests) for r in results)
        refused = sum(isinstance(r, Unauthorized) for r in results)
        return throttled, refused

    throttled, refused = _run(scenario())
    assert (throttled, refused) == (297, 3)
    assert len(keystone.calls) == 4  # three of the flood's, and the other client's
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
    checks = _checks(keystone, concurrency=1, per_client=10, timeout=0.2)

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
    checks = _checks(keystone, concurrency=1, per_client=100, timeout=0.2)

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
    # were dropped when their turn came.
    assert keystone.calls == ["garbage-0", "token-fresh"]
    checks.close()
