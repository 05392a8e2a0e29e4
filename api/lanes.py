"""Blocking calls the API makes on a client's behalf before (or without) a process slot:
Keystone's token checks at the door, portal sign-ins. Each lane has threads of its own, so
these calls never take a thread, a slot or a database connection of the requests already
admitted, and its queue is taken in turns by client: one client (or one site, or one user)
sending a thousand calls waits behind its own calls, not in front of everyone else's.

- At most `threads` calls run at once, at most `per_client` of them one client's.
- A client may have at most `waiting_per_client` calls queued or running (429 beyond, at
  once, without a call).
- Whenever a thread is free, the next call is the first queued call of the client that has
  waited longest for its turn (round robin over clients), not the oldest call overall: a
  flood from one address, or of many addresses each sending a few, delays a newcomer by at
  most one call per client ahead of it, never by the whole flood.
- A caller waits at most `timeout` (503 beyond). A call nobody waits for any more is dropped
  before it starts; one that started keeps its thread until it ends (the thread is the
  bound, whatever the callers do)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from services.errors import CairnError, ServiceUnavailable, TooManyRequests

log = logging.getLogger(__name__)

T = TypeVar("T")

QUEUE_PER_CLIENT = 32
"""Calls one client may have queued or running in one lane: room for a few people behind one
address to be served in turn, and a bound on what one client keeps waiting."""


@dataclass(eq=False)
class _Call:
    client: str
    call: Callable[[], Any]
    future: asyncio.Future[Any]
    refuse: Callable[[], CairnError | None] | None
    """Asked when the call would start: an error answers it instead (a client that lost
    the right to calls while it waited)."""
    queued: bool = True


@dataclass(eq=False)
class FairLane:
    name: str
    threads: int
    per_client: int
    timeout: float
    waiting_per_client: int = QUEUE_PER_CLIENT
    _queues: dict[str, deque[_Call]] = field(default_factory=dict)
    """Clients with calls queued, in the order their turn comes."""
    _running: dict[str, int] = field(default_factory=dict)
    _held: dict[str, int] = field(default_factory=dict)
    """Calls queued or running, per client."""
    _busy: int = 0
    _executor: ThreadPoolExecutor | None = None

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def run(self, client: str, call: Callable[[], T], *, what: str,
                  timeout: float | None = None) -> T:
        """`call()` on one of the lane's threads when `client`'s turn comes. Raises what
        the call raised, TooManyRequests, or ServiceUnavailable when it has not returned
        within `timeout` (the lane's by default) of being asked."""
        seconds = self.timeout if timeout is None else timeout
        try:
            result: T = await asyncio.wait_for(self.submit(client, call), seconds)
        except TimeoutError:
            raise ServiceUnavailable(f"{what} did not finish within {seconds:g} s (Keystone "
                                     "is slow or busy); try again shortly") from None
        return result

    def submit(self, client: str, call: Callable[[], T], *,
               refuse: Callable[[], CairnError | None] | None = None) -> asyncio.Future[T]:
        """Queues `call()`; cancelling the future drops it if it has not started. Raises
        TooManyRequests when `client` holds its share of the queue already. `refuse` is
        asked when the call would start: an error answers it instead."""
        if self._held.get(client, 0) >= self.waiting_per_client:
            raise TooManyRequests(f"{self.waiting_per_client} of your requests are waiting "
                                  f"for {self.name} already; send more when they are "
                                  "answered", retry_after=1)
        entry = _Call(client, call, asyncio.get_running_loop().create_future(), refuse)
        self._queues.setdefault(client, deque()).append(entry)
        self._held[client] = self._held.get(client, 0) + 1
        entry.future.add_done_callback(lambda _done: self._dropped(entry))
        self._dispatch()
        return entry.future

    def _dropped(self, entry: _Call) -> None:
        """A call's future is done: if the call never started (its callers gave up), it
        leaves the queue."""
        if not entry.queued:
            return
        entry.queued = False
        queue = self._queues[entry.client]
        queue.remove(entry)
        if not queue:
            del self._queues[entry.client]
        self._release(self._held, entry.client)

    def _dispatch(self) -> None:
        while self._busy < self.threads:
            entry = self._next()
            if entry is None:
                return
            refused = entry.refuse() if entry.refuse is not None else None
            if refused is not None:
                self._release(self._held, entry.client)
                entry.future.set_exception(refused)
                continue
            self._start(entry)

    def _next(self) -> _Call | None:
        client = next((c for c in self._queues if self._running.get(c, 0) < self.per_client),
                      None)
        if client is None:
            return None
        queue = self._queues.pop(client)
        entry = queue.popleft()
        entry.queued = False
        if queue:
            self._queues[client] = queue  # to the back of the round
        return entry

    def _start(self, entry: _Call) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self.threads,
                                                thread_name_prefix=self.name.replace(" ", "-"))
        self._busy += 1
        self._running[entry.client] = self._running.get(entry.client, 0) + 1
        thread = asyncio.get_running_loop().run_in_executor(self._executor, entry.call)
        thread.add_done_callback(lambda done: self._finished(entry, done))

    def _finished(self, entry: _Call, done: asyncio.Future[Any]) -> None:
        self._busy -= 1
        self._release(self._running, entry.client)
        self._release(self._held, entry.client)
        if done.cancelled():
            error: BaseException | None = ServiceUnavailable(f"{self.name} is shutting down")
        else:
            error = done.exception()
        if not entry.future.done():
            if error is not None:
                entry.future.set_exception(error)
            else:
                entry.future.set_result(done.result())
        self._dispatch()

    @staticmethod
    def _release(counts: dict[str, int], client: str) -> None:
        left = counts.get(client, 0) - 1
        if left > 0:
            counts[client] = left
        else:
            counts.pop(client, None)


@dataclass(frozen=True)
class KeystoneLanes:
    """The door's two lanes to Keystone, so that nobody Cairn does not know yet can delay
    anybody it does."""

    unknown: FairLane
    """For clients not validated yet: tokens new to the process, portal sign-ins. Taken in
    turns by client network (`api/peers.py`)."""
    validated: FairLane
    """For callers Keystone validated before: rechecks of their tokens when the cache time
    runs out, the calls of their portal sessions. Taken in turns by user. A garbage token
    can never enter it: its key is a token Keystone accepted, or a session Cairn sealed."""

    @classmethod
    def make(cls, *, threads: int, per_client: int, timeout: float) -> KeystoneLanes:
        return cls(FairLane("Keystone (new clients)", threads=threads, per_client=per_client,
                            timeout=timeout),
                   FairLane("Keystone (known users)", threads=threads,
                            per_client=per_client, timeout=timeout))

    def close(self) -> None:
        self.unknown.close()
        self.validated.close()
