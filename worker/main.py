"""`cairn-worker`: runs the Celery worker on the cairn queue.

The thread pool suits the work: librbd releases the GIL during I/O, and one process keeps
one set of Ceph connections. Killing the process (even with SIGKILL) stops its jobs; their
heartbeats stop and cairn-scheduler hands them to another worker."""

from __future__ import annotations

import faulthandler
import logging
import signal

from services.dispatch import QUEUE
from services.metrics import exposition
from services.settings import settings_for


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # First: the Celery app reads the settings when it is imported.
    settings = settings_for("cairn-worker")
    from worker.celery_app import app

    # `kill -USR2 <pid>` writes every thread's stack to the log, even when no Python code
    # can run (a thread holding the GIL while it waits in librbd): how an operator (or a
    # test that timed out) sees what a stuck worker is doing. SIGUSR1 is Celery's own.
    faulthandler.register(signal.SIGUSR2, all_threads=True)

    exposition.serve("cairn-worker", settings.metrics_host, settings.worker_metrics_port)
    app.worker_main([
        "worker", "--pool=threads", f"--concurrency={settings.worker_concurrency}",
        f"--queues={QUEUE}", "--loglevel=INFO", "--without-gossip", "--without-mingle",
    ])
