"""A backup job: the steps of its target's kind (`DataPath.backup`), driven to the commit
point by `drive`."""

from __future__ import annotations

from services import targets
from services.targets.base import not_configured
from worker.engine.copy import CopyStats
from worker.managers.backup import BackupSteps
from worker.managers.claim import ClaimedJob
from worker.managers.drive import JobSteps, drive
from worker.managers.lifecycle import run_job
from worker.managers.reporter import JobReporter
from worker.managers.source_snapshots import SourceSnapshotRemoval
from worker.runtime import Runtime
from worker.targets import data_path


def run_backup(rt: Runtime, job_id: str) -> None:
    run_job(rt, job_id, "backup",
            lambda job, reporter: drive(job, reporter, steps_for(rt, job, reporter)))


def steps_for(rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> JobSteps:
    target = targets.find(rt.settings, job.target)
    if target is None:
        return UnconfiguredTarget(rt, job, reporter)
    return data_path(target).backup(rt, job, reporter)


class UnconfiguredTarget(BackupSteps):
    """A backup queued to a target the service no longer configures: it fails inside
    `drive`, saying so (`target_not_configured`), before it made anything, and its restore
    point becomes `error` with the reason."""

    def copy(self) -> tuple[CopyStats, SourceSnapshotRemoval]:
        raise not_configured(self.rp.target)

    def clean_up(self) -> None:
        pass  # nothing was made
