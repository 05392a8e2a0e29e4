"""Celery's Redis transport, made to survive losing Redis while a task is unacknowledged.

With kombu 5.7, when the broker connection is lost the consumer closes the channel, and
the channel then restores its unacknowledged messages through a new Redis client made
from the connection's settings, which closing has already cleared: an AttributeError
that Celery calls unrecoverable. The worker then finishes its running tasks and hangs in
its shutdown, alive and taking no more jobs. Here the missing settings are reported as
the connection error they are, which kombu ignores on close and Celery answers by
reconnecting. The messages stay in Redis's unacknowledged set (restored after the
visibility timeout); Cairn's jobs table decides what runs, so a late redelivery of a
finished job is a no-op, and the scheduler re-sends any job whose message was lost."""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

TRANSPORT = "services.broker:Transport"


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> Any:
        if self.connection.client is None:
            raise RedisConnectionError("the broker connection was closed")
        return super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]


class Transport(kombu_redis.Transport):
    Channel = Channel
