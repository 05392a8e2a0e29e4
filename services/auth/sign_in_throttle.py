"""How often a client address may try to sign in to the portal, counted in Redis so every
API process counts together: `portal_sign_in_attempts_per_minute` attempts a minute, and
failed ones within `portal_sign_in_failure_window_seconds`: `portal_sign_in_failures` per
user name, six times as many over all user names. Past either, the address is refused (429,
with Retry-After) until its window ends, before Keystone is asked anything.

Per address, not per user: a lockout per user name would let anyone lock a user out of the
portal from anywhere; guesses spread over many addresses are Keystone's own lockout's to
stop (`[security_compliance] lockout_failure_attempts`). The counters are fixed windows
that start with their first count (INCR, then EXPIRE once).

An attempt counts as a failure from the moment it is let through, and is taken back once
Keystone accepted the password (or was never asked): counted after Keystone's answer, five
guesses sent at once all passed the check before any of them had failed. Redis is asked on
threads of the throttle's own, within `TIMEOUT_SECONDS`: sign-ins take no thread of the
requests the API admitted."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from redis import Redis
from redis.exceptions import RedisError

from services.errors import ServiceUnavailable, TooManyRequests
from services.settings import Settings

log = logging.getLogger(__name__)

_PREFIX = "cairn:sign-in:"
TIMEOUT_SECONDS = 2.0
THREADS = 2
"""Threads that ask Redis: one round trip each, well under a millisecond."""
_TAKE_BACK = """
for _, key in ipairs(KEYS) do
    if redis.call('exists', key) == 1 then redis.call('decr', key) end
end
"""
"""A failure taken back only from a count that is still running: DECR on a key whose
window has ended would make a count of -1 that never expires."""
T = TypeVar("T")
ALL_USERS_FACTOR = 6
"""Failures over every user name from one address, as a multiple of the per-user count:
enough for a few people behind one address to mistype, not for a password spray."""


class SignInThrottle:
    def __init__(self, redis: Redis, *, attempts_per_minute: int, failures: int,
                 window_seconds: float) -> None:
        self.redis = redis
        self.attempts_per_minute = attempts_per_minute
        self.failures = failures
        self.window = max(1, int(window_seconds))
        self._executor = ThreadPoolExecutor(max_workers=THREADS,
                                            thread_name_prefix="sign-in-throttle")

    @classmethod
    def from_settings(cls, settings: Settings) -> SignInThrottle:
        return cls(Redis.from_url(settings.redis_url, socket_timeout=TIMEOUT_SECONDS,
                                  socket_connect_timeout=TIMEOUT_SECONDS),
                   attempts_per_minute=settings.portal_sign_in_attempts_per_minute,
                   failures=settings.portal_sign_in_failures,
                   window_seconds=settings.portal_sign_in_failure_window_seconds)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def attempt(self, address: str, user: str) -> None:
        """Counts one attempt, and one failure until `settle` takes it back; raises
        TooManyRequests when the address may not try now (nothing counted then)."""
        await self._run(self._attempt, address, user)

    async def settle(self, address: str, user: str) -> None:
        """The attempt was no failed guess (Keystone accepted the password, or was never
        asked): its failure is taken back. Logged, not raised, when Redis cannot be reached:
        the sign-in's answer stands."""
        try:
            await self._run(self._settle, address, user)
        except ServiceUnavailable:
            log.error("could not take back a portal sign-in counted as failed")

    def _attempt(self, address: str, user: str) -> None:
        attempts = self._key("attempts", address)
        failed = (self._key("failed", address), self._key("failed", address, user))
        pipe = self.redis.pipeline()
        pipe.incr(attempts)
        pipe.expire(attempts, 60, nx=True)
        pipe.ttl(attempts)
        for key in failed:
            pipe.incr(key)
            pipe.expire(key, self.window, nx=True)
            pipe.ttl(key)
        tried, _, tried_ttl, by_address, _, address_ttl, by_user, _, user_ttl = pipe.execute()
        refusal = None
        if int(by_address) > self.failures * ALL_USERS_FACTOR:
            refusal = TooManyRequests("too many failed sign-ins from your address; try again "
                                      "later", retry_after=int(address_ttl))
        elif int(by_user) > self.failures:
            refusal = TooManyRequests("too many failed sign-ins of this user from your "
                                      "address; try again later, or ask your administrator "
                                      "to reset the password", retry_after=int(user_ttl))
        elif int(tried) > self.attempts_per_minute:
            refusal = TooManyRequests("too many sign-ins from your address; try again in a "
                                      "minute", retry_after=int(tried_ttl))
        if refusal is not None:
            self.redis.eval(_TAKE_BACK, len(failed), *failed)
            raise refusal

    def _settle(self, address: str, user: str) -> None:
        self.redis.eval(_TAKE_BACK, 2, self._key("failed", address),
                        self._key("failed", address, user))

    async def _run(self, call: Callable[[str, str], T], address: str, user: str) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(
                loop.run_in_executor(self._executor, call, address, user), TIMEOUT_SECONDS)
        except (RedisError, TimeoutError) as exc:
            raise _unreachable(exc) from None

    @staticmethod
    def _key(kind: str, address: str, user: str | None = None) -> str:
        # User names are hashed: Redis holds no list of who tried to sign in.
        who = "" if user is None else ":" + hashlib.sha256(user.lower().encode()).hexdigest()
        return f"{_PREFIX}{kind}:{address}{who}"


def _unreachable(exc: Exception) -> ServiceUnavailable:
    log.error("could not check portal sign-in attempts: %s", exc)
    return ServiceUnavailable("the portal cannot count sign-in attempts right now (its "
                              "Redis is unreachable); try again in a few seconds")
