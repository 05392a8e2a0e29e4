"""Event deliveries leave a worker from threads of their own (`webhook_senders`), not from
Celery's pool: a receiver that is slow or gone holds a sender for its timeout, never a
thread a backup could use. The delivery task only hands the id over; the outbox row keeps
the truth, so a delivery lost with a dying process is attempted again."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from services.webhooks.delivery import deliver
from worker.runtime import Runtime

log = logging.getLogger(__name__)

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def submit(rt: Runtime, delivery_id: str) -> None:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(rt.settings.webhook_senders,
                                       thread_name_prefix="event-sender")
        _pool.submit(_send, rt, delivery_id)


def _send(rt: Runtime, delivery_id: str) -> None:
    try:
        deliver(rt.db, rt.settings, delivery_id)
    except Exception:
        # Its claim holds it for a while; the scheduler hands it out again after that.
        log.warning("delivery %s failed before it recorded an answer", delivery_id,
                    exc_info=True)
