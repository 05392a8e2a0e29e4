"""`cairn-scheduler`: the loop that keeps jobs moving. Today it reconciles lost and stuck
jobs; turning plans into jobs joins it with the plans feature."""

from __future__ import annotations

import logging
import signal
import threading
from datetime import timedelta

from services.base import utcnow
from services.db import Database
from services.dispatch import Dispatcher, make_celery
from services.scheduler.reconciler import reconcile
from services.settings import get_settings

log = logging.getLogger("cairn.scheduler")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = get_settings()
    dispatcher = Dispatcher(make_celery(settings.redis_url))
    db = Database(settings.database_url)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    log.info("cairn-scheduler started (reconcile every %.1f s)",
             settings.reconcile_interval_seconds)
    while not stop.is_set():
        try:
            result = reconcile(
                db, dispatcher, now=utcnow(),
                heartbeat_timeout=timedelta(seconds=settings.job_heartbeat_timeout_seconds),
                redispatch_after=timedelta(seconds=settings.job_redispatch_after_seconds),
            )
            if result.requeued or result.redispatched:
                log.info("requeued %s, re-sent %s", result.requeued, result.redispatched)
        except Exception:
            # The database may be restarting; the next round tries again.
            log.exception("reconcile round failed")
        stop.wait(settings.reconcile_interval_seconds)
    db.dispose()
    log.info("cairn-scheduler stopped")
