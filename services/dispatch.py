"""The broker's side of starting jobs: the Celery app's settings, the task each kind of job
runs, and sending admitted jobs over one producer.

Jobs are not sent from here when they are made: `services/jobs/submit.py` writes a job and
hands it to admission (services/scheduler/admission) after the commit, and admission takes
its concurrency slots and calls `Dispatcher.send_many`. A job whose message cannot be sent
stays `queued` and cairn-scheduler admits it later: the jobs table is the outbox."""

from __future__ import annotations

import logging

from celery import Celery

from services.broker import TRANSPORT
from services.status import JobKind

log = logging.getLogger(__name__)

QUEUE = "cairn"
SEND_BATCH = 500
TASK_FOR_KIND = {
    JobKind.BACKUP: "backup.run",
    JobKind.RESTORE: "restore.run",
    JobKind.DELETE: "restore_point.delete",
    JobKind.VERIFY: "restore_point.verify",
    JobKind.PRUNE: "plan.prune",
    JobKind.COPY: "restore_point.copy",
}


def make_celery(redis_url: str) -> Celery:
    app = Celery("cairn", broker=redis_url)
    app.conf.update(
        broker_transport=TRANSPORT,
        task_default_queue=QUEUE,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        # Publishing gives up quickly: the scheduler re-sends what did not go out.
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5},
        broker_transport_options={"visibility_timeout": 3600},
    )
    return app


class Dispatcher:
    def __init__(self, celery: Celery) -> None:
        self.celery = celery

    def send_many(self, jobs: list[tuple[str, JobKind]]) -> list[str]:
        """Send over one producer, in batches that go to Redis as one pipeline each: one
        message at a time costs two round trips and a new Redis client per message (~0.5 ms
        each, 5 s for 10 000 jobs). Returns the ids of the batches the broker took before
        any failure."""
        sent: list[str] = []
        try:
            with self.celery.producer_or_acquire() as producer:
                for start in range(0, len(jobs), SEND_BATCH):
                    batch = jobs[start:start + SEND_BATCH]
                    with producer.batch(max_size=SEND_BATCH * 2):
                        for job_id, kind in batch:
                            self.celery.send_task(TASK_FOR_KIND[kind], args=[job_id],
                                                  queue=QUEUE, producer=producer)
                    sent.extend(job_id for job_id, _ in batch)
        except Exception:
            log.warning("the broker took %d of %d jobs; the rest wait for the next round",
                        len(sent), len(jobs), exc_info=True)
        return sent


    def send_collect(self, target: str) -> None:
        """Ask a worker to collect an object target's garbage (no job row: a lost message
        only delays it to the next interval, and the target's lease keeps two apart)."""
        self.celery.send_task(COLLECT_TASK, args=[target], queue=QUEUE)


LEGACY_DELIVER_TASK = "webhook.deliver"
"""What cairn-scheduler sent for each event delivery before workers took deliveries from
the outbox themselves: a worker drops such a message (a scheduler of the previous release
may still send some during a rolling upgrade; the delivery's row is taken as any other)."""
COLLECT_TASK = "object_target.collect"
