"""The Celery application of cairn-worker, and its thin tasks: each takes a job id and
hands it to its manager."""

from __future__ import annotations

from services.dispatch import COLLECT_TASK, LEGACY_DELIVER_TASK, make_celery
from services.settings import get_settings
from worker.managers import object_gc
from worker.managers.backup_jobs import run_backup
from worker.managers.delete import run_delete
from worker.managers.offsite_copy import run_copy
from worker.managers.prune import run_prune
from worker.managers.restore import run_restore
from worker.managers.verify import run_verify
from worker.runtime import get_runtime

app = make_celery(get_settings().redis_url)


@app.task(name="backup.run")
def backup_run(job_id: str) -> None:
    run_backup(get_runtime(), job_id)


@app.task(name="restore.run")
def restore_run(job_id: str) -> None:
    run_restore(get_runtime(), job_id)


@app.task(name="restore_point.delete")
def restore_point_delete(job_id: str) -> None:
    run_delete(get_runtime(), job_id)


@app.task(name="restore_point.verify")
def restore_point_verify(job_id: str) -> None:
    run_verify(get_runtime(), job_id)


@app.task(name="restore_point.copy")
def restore_point_copy(job_id: str) -> None:
    run_copy(get_runtime(), job_id)


@app.task(name="plan.prune")
def plan_prune(job_id: str) -> None:
    run_prune(get_runtime(), job_id)


@app.task(name=LEGACY_DELIVER_TASK)
def event_deliver(delivery_id: str, key: str = "") -> None:
    """A scheduler of the previous release handed this delivery out: this worker's outbox
    reader takes it from the database (`worker/senders.py`)."""


@app.task(name=COLLECT_TASK)
def object_target_collect(target: str) -> None:
    object_gc.collect(get_runtime(), target)
