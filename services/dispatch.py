"""Sending jobs to the workers, only after the commit that created them.

A job is enqueued by `enqueue(session, job_id, kind)`; after the session commits (nothing
happens when it rolls back) the jobs are handed to admission (services/scheduler/admission),
which takes their concurrency slots and sends them to the broker. A job that gets no slot,
or whose message cannot be sent, stays `queued` and cairn-scheduler admits it later: the
jobs table is the outbox, so a worker never looks for a row that is not there."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import Celery
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

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

_OUTBOX = "cairn_outbox"


def enqueue(session: Session, job_id: str, kind: JobKind) -> None:
    session.info.setdefault(_OUTBOX, []).append((job_id, kind))


OutboxHandler = Callable[[list[str]], None]


def attach_outbox(sessions: sessionmaker[Session], handler: OutboxHandler) -> None:
    def after_commit(session: Session) -> None:
        pending: list[tuple[str, JobKind]] = session.info.pop(_OUTBOX, [])
        if not pending:
            return
        try:
            handler([job_id for job_id, _ in pending])
        except Exception:
            # Not lost: the rows are committed as queued and the scheduler admits them.
            log.warning("could not start jobs %s now; the scheduler will retry",
                        [job_id for job_id, _ in pending], exc_info=True)

    def after_soft_rollback(session: Session, previous: Any) -> None:
        # A savepoint rolled back inside the unit of work keeps the outbox; only the end
        # of the whole transaction drops what it would have sent.
        if not previous.nested:
            session.info.pop(_OUTBOX, None)

    event.listen(sessions, "after_commit", after_commit)
    event.listen(sessions, "after_soft_rollback", after_soft_rollback)
