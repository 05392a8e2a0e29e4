"""How often a client address may try to sign in to the portal, counted in Redis so every
API process counts together: `portal_sign_in_attempts_per_minute` attempts a minute, and
failed ones within `portal_sign_in_failure_window_seconds`: `portal_sign_in_failures` per
user name, six times as many over all user names. Past either, the address is refused (429,
with Retry-After) until its window ends, before Keystone is asked anything.

Per address, not per user: a lockout per user name would let anyone lock a user out of the
portal from anywhere; guesses spread over many addresses are Keystone's own lockout's to
stop (`[security_compliance] lockout_failure_attempts`). The counters are fixed windows
that start with their first count (INCR, then EXPIRE once)."""

from __future__ import annotations

import hashlib
import logging

from redis import Redis
from redis.exceptions import RedisError

from services.errors import ServiceUnavailable, TooManyRequests
from services.settings import Settings

log = logging.getLogger(__name__)

_PREFIX = "cairn:sign-in:"
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

    @classmethod
    def from_settings(cls, settings: Settings) -> SignInThrottle:
        return cls(Redis.from_url(settings.redis_url, socket_timeout=2,
                                  socket_connect_timeout=2),
                   attempts_per_minute=settings.portal_sign_in_attempts_per_minute,
                   failures=settings.portal_sign_in_failures,
                   window_seconds=settings.portal_sign_in_failure_window_seconds)

    def attempt(self, address: str, user: str) -> None:
        """Counts one attempt; TooManyRequests when the address may not try now."""
        attempts = self._key("attempts", address)
        by_address, by_user = self._key("failed", address), self._key("failed", address, user)
        try:
            pipe = self.redis.pipeline()
            pipe.incr(attempts)
            pipe.expire(attempts, 60, nx=True)
            pipe.ttl(attempts)
            pipe.get(by_address)
            pipe.ttl(by_address)
            pipe.get(by_user)
            pipe.ttl(by_user)
            tried, _, tried_ttl, failed, failed_ttl, user_failed, user_ttl = pipe.execute()
        except RedisError as exc:
            raise _unreachable(exc) from None
        if int(failed or 0) >= self.failures * ALL_USERS_FACTOR:
            raise TooManyRequests("too many failed sign-ins from your address; try again "
                                  "later", retry_after=int(failed_ttl))
        if int(user_failed or 0) >= self.failures:
            raise TooManyRequests("too many failed sign-ins of this user from your address; "
                                  "try again later, or ask your administrator to reset the "
                                  "password", retry_after=int(user_ttl))
        if int(tried) > self.attempts_per_minute:
            raise TooManyRequests("too many sign-ins from your address; try again in a "
                                  "minute", retry_after=int(tried_ttl))

    def failed(self, address: str, user: str) -> None:
        try:
            pipe = self.redis.pipeline()
            for key in (self._key("failed", address), self._key("failed", address, user)):
                pipe.incr(key)
                pipe.expire(key, self.window, nx=True)
            pipe.execute()
        except RedisError as exc:
            # The answer (401) stands; the failure goes uncounted, and is logged.
            log.error("could not count a failed portal sign-in: %s", exc)

    @staticmethod
    def _key(kind: str, address: str, user: str | None = None) -> str:
        # User names are hashed: Redis holds no list of who tried to sign in.
        who = "" if user is None else ":" + hashlib.sha256(user.lower().encode()).hexdigest()
        return f"{_PREFIX}{kind}:{address}{who}"


def _unreachable(exc: RedisError) -> ServiceUnavailable:
    log.error("could not check portal sign-in attempts: %s", exc)
    return ServiceUnavailable("the portal cannot count sign-in attempts right now (its "
                              "Redis is unreachable); try again in a few seconds")
