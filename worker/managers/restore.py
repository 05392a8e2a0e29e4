"""Restore of a restore point with the copy engine (sparse, parallel, QoS-paced), every
object checked against the manifest as it is read: into a new RBD image, into a new Cinder
volume, or in place over a detached Cinder volume. A retry after a crash resumes where the
last attempt stopped.

On failure or cancel: a new RBD image is removed; a new Cinder volume is deleted through
Cinder; a Cinder volume restored in place (its data partly overwritten) is set to `error`
so nobody attaches it by mistake, and the job's reason says so."""

from __future__ import annotations

import logging

from services.base import utcnow
from services.errors import CairnError, InvalidInput, VolumeInUse, VolumeNotOwned
from services.restore_points.cinder_restores import HELD_FOR_RESTORE
from services.restore_points.marks import remove_if_written_by
from services.status import RestoreMethod, RestoreMode
from services.storage.refs import ImageRef, parse_image_ref
from worker.managers.claim import ClaimedJob
from worker.managers.drive import JobSteps, Outcome, drive, failure_reason
from worker.managers.instant_restore import InstantRestoreSteps
from worker.managers.lifecycle import run_job
from worker.managers.reporter import JobReporter
from worker.managers.restore_point_steps import load_restore_point
from worker.runtime import Runtime
from worker.targets import data_path_of

log = logging.getLogger(__name__)


def run_restore(rt: Runtime, job_id: str) -> None:
    run_job(rt, job_id, "restore",
            lambda job, reporter: drive(job, reporter, _steps(rt, job, reporter)))


def _steps(rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> JobSteps:
    if job.restore_method == RestoreMethod.INSTANT:
        return InstantRestoreSteps(rt, job, reporter)
    return RestoreSteps(rt, job, reporter)


class RestoreSteps(JobSteps):
    """No commit point of a restore point's: a failed restore removes (or, in place, marks)
    only what it writes to, never the restore point it reads."""

    noun = "restore"

    def __init__(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
        assert job.restore_target is not None
        self.rt, self.job, self.reporter = rt, job, reporter
        self.rp = load_restore_point(rt, job.restore_point_id)
        self.dest = parse_image_ref(job.restore_target, field="target")
        self.cinder = CinderTarget(rt, job) if job.restore_mode is not None else None

    def work(self) -> Outcome:
        if self.cinder is not None:
            self.cinder.prepare()
        stats = data_path_of(self.rt.settings, self.rp.target).restore(
            self.rt, self.job, self.reporter, self.rp, self.dest, create=self.cinder is None)
        if self.cinder is not None:
            self.cinder.finish(bootable=bool(self.rp.source_bootable))
        self.reporter.record(ready_at=utcnow())
        return Outcome(stats=stats)

    def undo(self) -> str:
        if self.cinder is not None:
            return self.cinder.undo()
        return _remove_own_image(self.rt, self.dest, self.job.id)


def _remove_own_image(rt: Runtime, dest: ImageRef, job_id: str) -> str:
    """Remove the image this job created (never one it did not: it may be a user's)."""
    try:
        with rt.clusters.ioctx(dest.cluster, dest.pool) as ioctx:
            removed = remove_if_written_by(ioctx, dest.image, job_id)
    except Exception as exc:
        log.exception("removing the partial image %s of restore job %s", dest, job_id)
        _code, reason = failure_reason(exc)
        return f"could not remove the partial image {dest} ({reason}); remove it by hand"
    return f"removed the partial image {dest}" if removed else ""


class CinderTarget:
    """The Cinder side of a restore into a Cinder volume, with Cairn's service credentials
    (the user's token may have expired by the time a queued restore runs)."""

    def __init__(self, rt: Runtime, job: ClaimedJob) -> None:
        if rt.cinder is None:
            raise InvalidInput("this restore writes to a Cinder volume, but this worker has "
                               "no Cinder configured (CAIRN_CINDER, CAIRN_KEYSTONE)")
        assert job.restore_cinder_volume_id is not None
        self.api = rt.cinder.as_service()
        self.wait_seconds = rt.cinder.settings.wait_seconds
        self.job = job
        self.volume_id = job.restore_cinder_volume_id
        self.held = False
        """In place: the volume is in `maintenance` for this restore."""

    def prepare(self) -> None:
        if self.job.restore_mode == RestoreMode.NEW_VOLUME:
            self.api.wait_for(self.volume_id, "available", self.wait_seconds)
            return
        volume = self.api.get(self.volume_id)
        if volume.project_id is not None and volume.project_id != self.job.project_id:
            raise VolumeNotOwned(
                f"Cinder volume {self.volume_id} now belongs to another project (was it "
                "transferred?); nothing was restored over it", volume=self.volume_id)
        if self.job.restore_mode == RestoreMode.CINDER_BACKUP:
            # Cinder's backup service holds it for this restore and keeps its status.
            if volume.status != HELD_FOR_RESTORE:
                raise VolumeInUse(
                    f"Cinder volume {self.volume_id} is {volume.status}, no longer "
                    f"{HELD_FOR_RESTORE}: Cinder's backup service gave it up; nothing was "
                    "restored over it", volume=self.volume_id, status=volume.status)
            return
        if volume.status == "maintenance" and self.job.attempt > 1:
            self.held = True  # an earlier attempt of this job holds it
            return
        # os-reserve moves available -> attaching atomically, so a server attaching the
        # volume at this moment and this restore cannot both win; then maintenance keeps
        # users and Nova off it until the restore ends.
        try:
            self.api.action(self.volume_id, {"os-reserve": None})
        except CairnError as exc:
            raise VolumeInUse(f"Cinder volume {self.volume_id} is no longer available for a "
                              f"restore in place ({exc.message}); detach it and try again",
                              volume=self.volume_id) from None
        self.api.action(self.volume_id, {"os-reset_status": {"status": "maintenance"}})
        self.held = True

    def finish(self, *, bootable: bool) -> None:
        """Gives the volume back, bootable when the backed-up volume was: Nova boots from a
        volume only with that flag, and Cinder refuses to change it in maintenance. A volume
        Cinder's backup service holds is Cinder's to give back (and to flag)."""
        if self.job.restore_mode == RestoreMode.CINDER_BACKUP:
            return
        if self.held:
            self.api.action(self.volume_id, {"os-reset_status": {
                "status": "available", "attach_status": "detached"}})
            self.held = False
        if bootable:
            self.api.action(self.volume_id, {"os-set_bootable": {"bootable": True}})

    def undo(self) -> str:
        """After a failure: what was done about the volume, for the job's reason."""
        try:
            if self.job.restore_mode == RestoreMode.NEW_VOLUME:
                self.api.delete(self.volume_id)
                return f"deleted the new Cinder volume {self.volume_id}"
            if self.job.restore_mode == RestoreMode.CINDER_BACKUP:
                return (f"Cinder volume {self.volume_id} may be partly overwritten; Cinder's "
                        "backup service marks it error_restoring")
            if not self.held and self.job.attempt > 1:
                # An earlier attempt may have put it in maintenance and died.
                self.held = self.api.get(self.volume_id).status == "maintenance"
            if self.held:
                self.api.action(self.volume_id, {"os-reset_status": {"status": "error"}})
                return (f"Cinder volume {self.volume_id} was partly overwritten and is set to "
                        "error; restore it again, or delete it")
        except Exception as exc:
            log.exception("cleaning up Cinder volume %s of restore job %s", self.volume_id,
                          self.job.id)
            _code, reason = failure_reason(exc)
            return f"could not clean up Cinder volume {self.volume_id}: {reason}"
        return ""
