"""The per-volume lock row that serializes a volume's backup and its plan's prune, so a prune
can never delete the restore point a running incremental builds on. Taking it is an INSERT:
the primary key refuses a second holder. A lock whose holder job is no longer running (its
worker died and the job was queued again, or it ended) is stale and is taken over; a job
retried after a crash finds its own lock and keeps it."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from services.base import utcnow
from services.db import Database
from services.records.jobs import Job
from services.records.volumes import VolumeLock
from services.status import JobStatus


def try_lock(db: Database, volume_id: str, job_id: str) -> str | None:
    """Take the volume's lock for the job; returns the holder's job id when another running
    job holds it."""
    for _ in range(3):
        with db.session() as session:
            try:
                with session.begin_nested():
                    session.add(VolumeLock(volume_id=volume_id, job_id=job_id,
                                           acquired_at=utcnow()))
                return None
            except IntegrityError:
                pass
            holder = session.scalar(select(VolumeLock.job_id)
                                    .where(VolumeLock.volume_id == volume_id))
            if holder == job_id:
                return None
            if holder is None:
                continue  # released meanwhile: try again
            status = session.scalar(select(Job.status).where(Job.id == holder))
            if status == JobStatus.RUNNING:
                return holder
            session.execute(delete(VolumeLock).where(VolumeLock.volume_id == volume_id,
                                                     VolumeLock.job_id == holder))
    # Three rounds of holders coming and going: report it busy and let the caller retry.
    return "another job"


def unlock(db: Database, volume_id: str, job_id: str) -> None:
    with db.session() as session:
        session.execute(delete(VolumeLock).where(VolumeLock.volume_id == volume_id,
                                                 VolumeLock.job_id == job_id))
