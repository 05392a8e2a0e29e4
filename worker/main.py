"""`cairn-worker`: runs the Celery worker on the cairn queue, and the webhook senders beside
it (`worker/senders.py`), which take event deliveries from the database, not the broker.

The thread pool suits the work: librbd releases the GIL during I/O, and one process keeps
one set of Ceph connections. Killing the process (even with SIGKILL) stops its jobs; their
heartbeats stop and cairn-scheduler hands them to another worker."""

from __future__ import annotations

import faulthandler
import logging
import signal

from services.db import Database
from services.dispatch import QUEUE
from services.errors import CairnError
from services.metrics import events as metrics
from services.metrics import exposition
from services.settings import Settings, settings_for
from services.webhooks import keys


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # First: the Celery app reads the settings when it is imported.
    settings = settings_for("cairn-worker")
    from worker import senders
    from worker.celery_app import app
    from worker.runtime import get_runtime

    # `kill -USR2 <pid>` writes every thread's stack to the log, even when no Python code
    # can run (a thread holding the GIL while it waits in librbd): how an operator (or a
    # test that timed out) sees what a stuck worker is doing. SIGUSR1 is Celery's own.
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    # And when librbd or librados aborts the process (a failed assertion, an uncaught C++
    # exception: "terminate called ..."), every thread's stack is in the log beside the C++
    # message, saying which job and call were in C at the time.
    faulthandler.enable(all_threads=True)

    _check_webhook_key(settings)
    for reason in ("key", "internal"):  # at 0 from the start, for the alert's increase()
        metrics.webhook_deliveries_unsigned.labels(reason)
    exposition.serve("cairn-worker", settings.metrics_host, settings.worker_metrics_port)
    senders.start(get_runtime())
    app.worker_main([
        "worker", "--pool=threads", f"--concurrency={settings.worker_concurrency}",
        f"--queues={QUEUE}", "--loglevel=INFO", "--without-gossip", "--without-mingle",
    ])


def _check_webhook_key(settings: Settings) -> None:
    """The worker signs webhook deliveries: without the deployment's key (or with another,
    or without a key some secret is sealed under), refuse to start, saying which setting to
    fix. The database is waited for a while first; a worker that could not check does not
    start either."""
    db = Database(settings.database_url, pool_size=1)
    try:
        keys.check_at_start(db, settings, wait=settings.worker_database_wait_seconds)
    except CairnError as exc:
        raise SystemExit(f"cairn-worker: {exc.message}") from None
    except keys.DatabaseNotReady as exc:
        raise SystemExit(f"cairn-worker: {exc}") from None
    finally:
        db.dispose()
