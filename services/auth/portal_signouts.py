"""Portal sessions signed out before they expire. The sealed cookie is the session's only
copy, so deleting it from the browser does not end a copy kept elsewhere (a stolen cookie,
a browser that missed the deletion), and Keystone may fail to revoke its tokens: each
signed-out session is therefore recorded in Redis, by its id, until it would have expired,
and every API process refuses it from then on.

Redis answers within `TIMEOUT_SECONDS` or the session cannot be used (503), never the other
way round. The question is asked on a small pool of threads of its own: the event loop
never waits on Redis."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from redis import Redis
from redis.exceptions import RedisError

from services.auth.portal_sessions import PortalSession
from services.errors import ServiceUnavailable

log = logging.getLogger(__name__)

_PREFIX = "cairn:portal:signed-out:"
TIMEOUT_SECONDS = 2.0
THREADS = 4
"""Threads that ask Redis: one Redis round trip each, well under a millisecond."""


class PortalSignOuts:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._executor = ThreadPoolExecutor(max_workers=THREADS,
                                            thread_name_prefix="portal-signouts")

    @classmethod
    def from_url(cls, url: str) -> PortalSignOuts:
        return cls(Redis.from_url(url, socket_timeout=TIMEOUT_SECONDS,
                                  socket_connect_timeout=TIMEOUT_SECONDS))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def sign_out(self, session: PortalSession, now: datetime) -> bool:
        """Blocks (run it on a thread): the session opens nowhere from now on. False when
        Redis could not record it."""
        seconds = int((session.expires_at - now).total_seconds()) + 1
        if seconds <= 0:
            return True
        try:
            self.redis.set(_PREFIX + session.id, b"1", ex=seconds)
        except RedisError as exc:
            log.error("could not record a portal sign-out: %s", exc)
            return False
        return True

    async def record(self, session: PortalSession, now: datetime) -> bool:
        """`sign_out` on the store's own threads, within `TIMEOUT_SECONDS`."""
        loop = asyncio.get_running_loop()
        asked = loop.run_in_executor(self._executor, self.sign_out, session, now)
        try:
            return await asyncio.wait_for(asked, TIMEOUT_SECONDS)
        except TimeoutError:
            log.error("could not record a portal sign-out within %g s", TIMEOUT_SECONDS)
            return False

    async def signed_out(self, session: PortalSession) -> bool:
        loop = asyncio.get_running_loop()
        asked = loop.run_in_executor(self._executor, self.redis.exists, _PREFIX + session.id)
        try:
            return bool(await asyncio.wait_for(asked, TIMEOUT_SECONDS))
        except (RedisError, TimeoutError) as exc:
            log.error("could not check a portal session: %s", exc)
            raise ServiceUnavailable("the portal's session store (Redis) is unreachable; "
                                     "try again in a few seconds") from None
