"""Event deliveries leave a worker from threads of their own (`webhook_senders`), not from
Celery's pool: a receiver that is slow or gone holds a sender until its attempt's deadline,
never a thread a backup could use. The delivery task only hands the id over.

The senders are shared fairly and their queue is bounded:
- each delivery comes with its fairness key (its webhook's project; OpenStack
  notifications share one), and one key's deliveries hold at most
  `webhook_senders_per_project` senders at once, so a project whose receivers all trickle
  leaves the other senders to everyone else; keys with work waiting take turns;
- at most WAITING_PER_KEY ids wait per key and WAITING in all. An id that finds no room is
  dropped, and nothing is lost: the delivery row is the truth and still pending, and the
  scheduler hands it out again (`services/webhooks/delivery.py`, RESEND_AFTER). The queue
  only wakes senders."""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter, deque
from collections.abc import Callable

from services.webhooks.delivery import deliver
from worker.runtime import Runtime

log = logging.getLogger(__name__)

WAITING_PER_KEY = 64
"""A project has at most 10 webhooks and the scheduler hands out one delivery of each at a
time: more than this waiting for one key means the broker redelivered, or notifications
pile up while their bus is slow."""

WAITING = 4096
"""All ids waiting in one process: a few hundred KiB at most."""


class Senders:
    """Threads that run `work(delivery_id)`, fairly across keys, from a bounded queue."""

    def __init__(self, work: Callable[[str], None], threads: int, per_key: int,
                 waiting_per_key: int = WAITING_PER_KEY, waiting: int = WAITING) -> None:
        self._work = work
        self._per_key = per_key
        self._waiting_per_key = waiting_per_key
        self._waiting_max = waiting
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
                # Its claim holds it for a while; the scheduler hands it out again after.
                log.warning("delivery %s failed before it recorded an answer", delivery_id,
                            exc_info=True)
            finally:
                with self._cond:
                    self._running[key] -= 1
                    if not self._running[key]:
                        del self._running[key]
                    self._cond.notify_all()


_lock = threading.Lock()
_senders: tuple[int, Senders] | None = None


def submit(rt: Runtime, delivery_id: str, key: str) -> None:
    global _senders
    with _lock:
        if _senders is None or _senders[0] != os.getpid():
            _senders = (os.getpid(), Senders(
                lambda found: deliver(rt.db, rt.settings, found), rt.settings.webhook_senders,
                rt.settings.webhook_senders_per_project))
        senders = _senders[1]
    if not senders.submit(delivery_id, key):
        log.warning("no room for delivery %s (%s) in this worker's senders; the scheduler "
                    "hands it out again later", delivery_id, key)
