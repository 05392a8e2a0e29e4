"""What a job's end tells the project's webhooks (and, through the same payload, OpenStack
notifications): Cinder's field names (tenant_id, volume_id, backup_id, size, status,
fail_reason, parent_id) plus Cairn's (job, plan, kind, bytes, duration, bottleneck).
Written in the transaction that records the job's end: the event exists exactly when the
end does."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from services.jobs.load import job_load
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import JobStatus
from services.webhooks import events
from worker.engine.copy import CopyStats

if TYPE_CHECKING:
    from worker.managers.claim import ClaimedJob

log = logging.getLogger(__name__)

GIB = 1024**3


@dataclass(frozen=True, kw_only=True)
class JobFacts:
    """A job as it started or ended in a worker."""

    id: str
    project_id: str
    kind: str
    status: JobStatus
    plan_id: str | None
    target: str | None
    volume_id: str | None
    restore_point_id: str | None
    restore_target: str | None
    error_code: str | None
    error_message: str | None
    stats: CopyStats | None
    seconds: float

    @classmethod
    def of(cls, job: ClaimedJob, status: JobStatus, *, error_code: str | None = None,
           error_message: str | None = None, stats: CopyStats | None = None,
           seconds: float = 0.0) -> JobFacts:
        return cls(id=job.id, project_id=job.project_id, kind=str(job.kind or ""),
                   status=status, plan_id=job.plan_id, target=job.target,
                   volume_id=job.volume_id, restore_point_id=job.restore_point_id,
                   restore_target=job.restore_target, error_code=error_code,
                   error_message=error_message, stats=stats, seconds=seconds)


def job_payload(session: Session, job: JobFacts) -> tuple[str | None, dict[str, Any]]:
    """(the event's subject: the volume as its tenant names it, the event's data)."""
    volume = session.get(Volume, job.volume_id) if job.volume_id else None
    rp = session.get(RestorePoint, job.restore_point_id) if job.restore_point_id else None
    subject = volume.public_name if volume is not None else None
    data: dict[str, Any] = {
        "tenant_id": job.project_id, "user_id": None, "volume_id": subject,
        "backup_id": job.restore_point_id,
        "size": math.ceil(rp.size_bytes / GIB) if rp is not None and rp.size_bytes else None,
        "status": job.status.value, "fail_reason": job.error_message,
        "parent_id": rp.base_restore_point_id if rp is not None else None,
        "job_id": job.id, "job_kind": job.kind, "error_code": job.error_code,
        "plan_id": job.plan_id, "target": job.target,
        "kind": str(rp.kind) if rp is not None else None,
        "bytes": job.stats.bytes_written if job.stats else None,
        "duration_seconds": round(job.seconds, 3),
        "bottleneck": _bottleneck(job.stats),
    }
    if job.restore_target is not None:
        data["restore_target"] = job.restore_target
    return subject, data


def record_job_start(session: Session, job: ClaimedJob, now: datetime, *,
                     notify_openstack: bool = False) -> None:
    """Queue a backup's or restore's `.start` event (Cinder has them for these two)."""
    event_type = events.job_start_type(str(job.kind))
    if event_type is None:
        return
    _record(session, JobFacts.of(job, JobStatus.RUNNING), event_type, now, notify_openstack)


def record_job_end(session: Session, job: JobFacts, now: datetime, *,
                   notify_openstack: bool = False) -> None:
    """Queue the job's event for the project's webhooks; never fails the job's end (a
    failure here loses the event, and says so in the log)."""
    event_type = events.job_event_type(job.kind, job.status == JobStatus.SUCCEEDED)
    if event_type is not None:
        _record(session, job, event_type, now, notify_openstack)


def _record(session: Session, job: JobFacts, event_type: str, now: datetime,
            notify_openstack: bool) -> None:
    try:
        with session.begin_nested():
            subject, data = job_payload(session, job)
            events.record(session, job.project_id, event_type, subject=subject, data=data,
                          now=now, notify_openstack=notify_openstack)
    except Exception:
        log.warning("job %s: could not queue its %s event", job.id, event_type, exc_info=True)


def _bottleneck(stats: CopyStats | None) -> str | None:
    if stats is None:
        return None
    load = job_load(copy_seconds=stats.elapsed, window=stats.window,
                    read_seconds=stats.read_seconds, write_seconds=stats.write_seconds,
                    qos_wait_seconds=stats.qos_wait_seconds,
                    engine_seconds=stats.engine_seconds)
    return load.bottleneck if load is not None else None
