"""Keystone checks of the tokens requests bring, at the door (`api/callers.py`), before the
request may take a slot.

- A token validated or refused within the cache time is decided at once, in the event loop,
  with no thread and no wait. One in use near the end of its cache time is checked again in
  the background, so an active caller never waits for its recheck.
- A token Keystone validated before (`TokenValidator.known`), or a portal session's (Cairn
  sealed it after Keystone issued it), whose cache time has run out is checked in the lane
  of known users (`api/lanes.py`): garbage tokens never reach that lane, so however many
  there are, a tenant's recheck waits for Keystone alone.
- Any other token is checked in the lane of new clients, in turns by client network. A
  client network whose tokens Keystone refused `refusals_per_client` times within a minute
  gets 429 for its new tokens, at once, for the rest of that minute; tokens merely waiting
  count against nobody, so two garbage tokens in flight from an address no longer refuse a
  good one from the same address.
- Requests that bring the same token share one check; a check nobody waits for any more is
  dropped before it reaches Keystone."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from functools import partial

from api.lanes import FairLane, KeystoneLanes
from services.auth.keystone import TokenInfo, TokenValidator
from services.context import RequestContext
from services.errors import CairnError, ServiceUnavailable, TooManyRequests, Unauthorized

log = logging.getLogger(__name__)

REFUSAL_WINDOW_SECONDS = 60.0
TRACKED_CLIENTS = 10_000
"""Client networks whose refusals are counted at once; beyond, the oldest counts go first
(a client rotating through more networks than this gets no more than their number of
checks a minute anyway: the lanes' turns)."""


class Refusals:
    """Tokens Keystone refused, counted per client network in fixed windows of a minute."""

    def __init__(self, limit: int, *, window: float = REFUSAL_WINDOW_SECONDS,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window = window
        self.now = now
        self._counts: dict[str, tuple[float, int]] = {}

    def add(self, client: str) -> None:
        now = self.now()
        ends, count = self._counts.get(client, (0.0, 0))
        if ends <= now:
            self._counts.pop(client, None)
            ends, count = now + self.window, 0
            if len(self._counts) >= TRACKED_CLIENTS:
                self._prune(now)
        self._counts[client] = (ends, count + 1)

    def refusal(self, client: str) -> CairnError | None:
        """TooManyRequests for a client whose tokens were refused too often lately."""
        ends, count = self._counts.get(client, (0.0, 0))
        left = ends - self.now()
        if count < self.limit or left <= 0:
            return None
        return TooManyRequests(f"Keystone refused {count} tokens from your address within "
                               "a minute; send a valid token after the minute has passed",
                               retry_after=max(1, int(left + 0.999)))

    def _prune(self, now: float) -> None:
        for client in [c for c, (ends, _) in self._counts.items() if ends <= now]:
            del self._counts[client]
        while len(self._counts) >= TRACKED_CLIENTS:
            del self._counts[next(iter(self._counts))]


class TokenChecks:
    def __init__(self, validator: TokenValidator, *, threads: int, per_client: int,
                 refusals_per_client: int, timeout: float) -> None:
        self.validator = validator
        self.timeout = timeout
        self.refusals = Refusals(refusals_per_client)
        self.lanes = KeystoneLanes.make(threads=threads, per_client=per_client,
                                        timeout=timeout)
        self._running: dict[str, asyncio.Future[TokenInfo]] = {}
        self._waiting: dict[str, int] = {}

    def close(self) -> None:
        self.lanes.close()

    async def context(self, token: str, client: str, method: str, path: str, *,
                      vouched_for: str | None = None) -> RequestContext:
        """The token's caller of the request `method path`: Unauthorized, Forbidden (its
        access rules do not list the request), TooManyRequests or ServiceUnavailable
        otherwise. `client` is the client network; `vouched_for`, the user a sealed portal
        session says the token is (it goes to the lane of known users)."""
        # Raises for a token refused lately.
        cached = self.validator.cached_context(token, method, path)
        if cached is not None:
            if self.validator.refresh_due(token):
                self._refresh(token, f"{cached.project_id}/{cached.user_id}")
            return cached
        known = self.validator.known(token)
        if known is not None:
            info = await self._checked(token, self.lanes.validated,
                                       f"{known.project_id}/{known.user_id}")
        elif vouched_for is not None:
            info = await self._checked(token, self.lanes.validated, vouched_for)
        else:
            refused = self.refusals.refusal(client)
            if refused is not None:
                raise refused
            info = await self._checked(token, self.lanes.unknown, client)
        return self.validator.context_of(info, token, method, path)

    async def _checked(self, token: str, lane: FairLane, client: str) -> TokenInfo:
        key = hashlib.sha256(token.encode()).hexdigest()
        check = self._running.get(key)
        if check is None:
            check = self._start(key, lane, client, token, recheck=False)
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            # shield: one waiter's timeout must not cancel the check others share.
            return await asyncio.wait_for(asyncio.shield(check), self.timeout)
        except TimeoutError:
            raise ServiceUnavailable(f"Keystone did not check the token within "
                                     f"{self.timeout:g} s; try again shortly") from None
        finally:
            left = self._waiting[key] - 1
            if left:
                self._waiting[key] = left
            else:
                del self._waiting[key]
                if not check.done():
                    check.cancel()  # nobody waits: dropped, if it has not started

    def _refresh(self, token: str, who: str) -> None:
        """Rechecks a token in use before its cache time runs out; the outcome lands in the
        validator's cache (an error leaves the entry to run out)."""
        key = hashlib.sha256(token.encode()).hexdigest()
        if key in self._running:
            return
        # TooManyRequests: this user's checks are queued already; the cache serves meanwhile.
        with contextlib.suppress(TooManyRequests):
            self._start(key, self.lanes.validated, who, token, recheck=True)

    def _start(self, key: str, lane: FairLane, client: str, token: str, *,
               recheck: bool) -> asyncio.Future[TokenInfo]:
        loop = asyncio.get_running_loop()
        counted = lane is self.lanes.unknown

        def validate() -> TokenInfo:
            try:
                return self.validator.validate(token, recheck=recheck)
            except Unauthorized:
                if counted:
                    loop.call_soon_threadsafe(self.refusals.add, client)
                raise

        # A client whose tokens Keystone refused too often while this one waited: dropped.
        check = lane.submit(client, validate, refuse=partial(self.refusals.refusal, client)
                            if counted else None)
        self._running[key] = check
        check.add_done_callback(lambda done: self._finished(key, done))
        return check

    def _finished(self, key: str, done: asyncio.Future[TokenInfo]) -> None:
        if self._running.get(key) is done:
            del self._running[key]
        if not done.cancelled():
            done.exception()  # seen, if every waiter had given up on it already
