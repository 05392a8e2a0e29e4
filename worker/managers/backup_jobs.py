"""A backup job: the steps of its target's kind (an RBD pool's or an object store's), driven
to the commit point by `drive`."""

from __future__ import annotations

from services.settings import is_object_target
from worker.managers.backup import BackupSteps
from worker.managers.claim import ClaimedJob
from worker.managers.drive import drive
from worker.managers.lifecycle import run_job
from worker.managers.object_backup import ObjectBackupSteps
from worker.managers.reporter import JobReporter
from worker.runtime import Runtime


def run_backup(rt: Runtime, job_id: str) -> None:
    run_job(rt, job_id, "backup",
            lambda job, reporter: drive(job, reporter, steps_for(rt, job, reporter)))


def steps_for(rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> BackupSteps:
    if job.target is not None and is_object_target(rt.settings, job.target):
        return ObjectBackupSteps(rt, job, reporter)
    return BackupSteps(rt, job, reporter)
