"""Event deliveries leave a worker from threads of their own (`webhook_senders`), not from
Celery's pool, and reach them without it: the worker's outbox reader takes due deliveries
from the database (`outbox.take_due`) whenever its senders have room, every
`webhook_poll_seconds` and as soon as a sender finishes. No broker message stands between
an event and a sender, so an event never waits for a job slot, however long the worker's
jobs run, and a receiver that is slow or gone holds a sender until its attempt's deadline,
never a thread a backup could use.

The senders are shared fairly and their queue is bounded:
- each delivery comes with its fairness key (its webhook's project; OpenStack
  notifications share one), and one key's deliveries hold at most
  `webhook_senders_per_project` senders at once, so a project whose receivers all trickle
  leaves the other senders to everyone else; keys with work waiting take turns. The
  reader takes no more of a key than that share, and no more in all than the senders
  have room for: what it cannot start stays in the outbox for this or another worker;
- at most WAITING_PER_KEY ids wait per key and WAITING in all. An id that finds no room is
  dropped, and nothing is lost: the delivery row is the truth and still pending, and it is
  taken again after `outbox.RESEND_AFTER`."""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter, deque
from collections.abc import Callable

from services.webhooks.delivery import deliver
from services.webhooks.outbox import take_due
from worker.runtime import Runtime

log = logging.getLogger(__name__)

WAITING_PER_KEY = 64
"""A project has at most 10 webhooks and a worker takes one delivery of each at a time:
more than this waiting for one key means notifications pile up while their bus is slow."""

WAITING = 4096
"""All ids waiting in one process: a few hundred KiB at most."""


class Senders:
    """Threads that run `work(delivery_id)`, fairly across keys, from a bounded queue."""

    def __init__(self, work: Callable[[str], None], threads: int, per_key: int,
                 waiting_per_key: int = WAITING_PER_KEY, waiting: int = WAITING,
                 on_free: Callable[[], None] | None = None) -> None:
        self._work = work
        self._threads = threads
        self._per_key = per_key
        self._waiting_per_key = waiting_per_key
        self._waiting_max = waiting
        self._on_free = on_free
        self._cond = threading.Condition()
        self._queues: dict[str, deque[str]] = {}
        """Keys in turn order: the key served last moves to the end."""
        self._running: Counter[str] = Counter()
        self._count = 0
        for number in range(threads):
            threading.Thread(target=self._serve, name=f"event-sender-{number}",
                             daemon=True).start()

    def submit(self, delivery_id: str, key: str) -> bool:
        """Queue the id; False when there is no room (it was dropped)."""
        with self._cond:
            queue = self._queues.get(key)
            if self._count >= self._waiting_max \
                    or (queue is not None and len(queue) >= self._waiting_per_key):
                return False
            self._queues.setdefault(key, deque()).append(delivery_id)
            self._count += 1
            self._cond.notify()
            return True

    def running(self) -> dict[str, int]:
        with self._cond:
            return {key: n for key, n in self._running.items() if n}

    def room(self) -> tuple[int, dict[str, int]]:
        """How many more deliveries the senders could start now, and what each key holds
        (running or waiting)."""
        with self._cond:
            held = Counter({key: n for key, n in self._running.items() if n})
            for key, queue in self._queues.items():
                held[key] += len(queue)
            return max(0, self._threads - sum(held.values())), dict(held)

    def _take(self) -> tuple[str, str]:
        """The next id, from the first key in turn that has one waiting and a sender to
        spare; waits until there is one. Called with the lock held."""
        while True:
            for key, queue in self._queues.items():
                if queue and self._running[key] < self._per_key:
                    delivery_id = queue.popleft()
                    self._count -= 1
                    self._running[key] += 1
                    del self._queues[key]
                    if queue:
                        self._queues[key] = queue  # its turn is over: to the end
                    return delivery_id, key
            self._cond.wait()

    def _serve(self) -> None:
        while True:
            with self._cond:
                delivery_id, key = self._take()
            try:
                self._work(delivery_id)
            except Exception:
                # Its claim holds it for a while; it is taken again after.
                log.warning("delivery %s failed before it recorded an answer", delivery_id,
                            exc_info=True)
            finally:
                with self._cond:
                    self._running[key] -= 1
                    if not self._running[key]:
                        del self._running[key]
                    self._cond.notify_all()
                if self._on_free is not None:
                    self._on_free()


class OutboxReader:
    """The thread that keeps a worker's senders fed from the outbox."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._wake = threading.Event()
        self.senders = Senders(lambda found: deliver(rt.db, rt.settings, found),
                               rt.settings.webhook_senders,
                               rt.settings.webhook_senders_per_project,
                               on_free=self._wake.set)
        threading.Thread(target=self._loop, name="event-outbox", daemon=True).start()

    def _loop(self) -> None:
        pause = self._rt.settings.webhook_poll_seconds
        failing = False
        while True:
            self._wake.clear()
            try:
                self.take()
                failing = False
            except Exception:
                # The database away: the rows wait there; say so once, not every round.
                if not failing:
                    log.warning("could not take due event deliveries; trying again",
                                exc_info=True)
                failing = True
            self._wake.wait(pause)

    def take(self) -> int:
        """Take as many due deliveries as the senders have room for; how many."""
        room, held = self.senders.room()
        taken = take_due(self._rt.db, self._rt.settings, room=room, held=held)
        for delivery_id, key in taken:
            if not self.senders.submit(delivery_id, key):
                log.warning("no room for delivery %s (%s) in this worker's senders; it is "
                            "taken again later", delivery_id, key)
        return len(taken)


_lock = threading.Lock()
_reader: tuple[int, OutboxReader] | None = None


def start(rt: Runtime) -> OutboxReader:
    """This process's senders and their outbox reader, started once per process."""
    global _reader
    with _lock:
        if _reader is None or _reader[0] != os.getpid():
            _reader = (os.getpid(), OutboxReader(rt))
        return _reader[1]
