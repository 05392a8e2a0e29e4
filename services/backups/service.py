"""On-demand backups: validate the request, register the volume, write the restore point
(`creating`) and its job (`queued`); the job is sent to a worker after the commit."""

from __future__ import annotations

from sqlalchemy.orm import Session

from services import targets
from services.backups.schemas import BackupCreate
from services.context import RequestContext
from services.errors import BackupAlreadyRunning
from services.jobs import factory
from services.jobs import repository as jobs
from services.jobs.submit import Duplicate, submit
from services.quotas import service as quotas
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.restore_points import factory as rp_factory
from services.settings import Settings
from services.volumes.resolve import VolumeResolver


def create_backup(session: Session, ctx: RequestContext, settings: Settings,
                  volumes_from: VolumeResolver, request: BackupCreate) -> Job:
    target = targets.resolve(settings, request.target).name
    volume = volumes_from.resolve(session, ctx, request.volume, field="volume")
    ref = volume.ref
    # The volume's project owns the backup, whoever asked for it (an administrator).
    project_id = volume.project_id
    room = quotas.estimate(session, volume.id, target, request.kind)
    quotas.require_room(session, project_id, 1, room)
    running = jobs.active_backup_for_volume(session, volume.id)
    if running is not None:
        raise _already_running(str(ref), running.id)
    rp = RestorePoint(**rp_factory.backup(project_id=project_id, volume_id=volume.id,
                                          target=target, kind=request.kind, room=room))
    session.add(rp)
    session.flush()
    try:
        return submit(session, factory.backup(
            project_id=project_id, volume_id=volume.id, target=target, kind=request.kind,
            restore_point_id=rp.id, max_attempts=settings.job_max_attempts,
            qos=factory.Qos(request.qos_bytes_per_second, request.qos_ops_per_second)),
            unique=True)
    except Duplicate:
        # A concurrent request won the one-active-backup-per-volume index.
        raise _already_running(str(ref), None) from None


def _already_running(volume: str, job_id: str | None) -> BackupAlreadyRunning:
    which = f" (job {job_id})" if job_id else ""
    return BackupAlreadyRunning(
        f"a backup of volume {volume!r} is already queued or running{which}; "
        "wait for it to finish", volume=volume, job_id=job_id)
