from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from services.base import utcnow
from services.jobs.models import Job
from services.status import JobKind, JobStatus


class JobProgress(BaseModel):
    bytes_done: int
    bytes_total: int | None = Field(description="Bytes to copy; known once the copy starts")
    percent: float | None


class JobTimings(BaseModel):
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_seconds: float | None = Field(description="From start to finish (or now)")
    read_seconds: float = Field(description="Time spent reading, summed over parallel operations")
    write_seconds: float = Field(description="Time spent writing, summed over parallel operations")
    qos_wait_seconds: float = Field(description="Time the job waited on its QoS limit")


class JobError(BaseModel):
    code: str
    message: str


class JobPublic(BaseModel):
    id: str
    kind: JobKind
    status: JobStatus
    project_id: str
    volume: str | None = Field(description="cluster/pool/image of the volume")
    restore_point_id: str | None
    restore_target: str | None = Field(description="Image a restore writes to")
    qos_bytes_per_second: int | None
    attempt: int
    max_attempts: int
    progress: JobProgress
    timings: JobTimings
    throughput_bytes_per_second: float | None
    error: JobError | None

    @classmethod
    def of(cls, job: Job) -> JobPublic:
        duration = None
        if job.started_at is not None:
            duration = ((job.finished_at or utcnow()) - job.started_at).total_seconds()
        percent = None
        if job.bytes_total:
            percent = round(100.0 * job.bytes_done / job.bytes_total, 1)
        elif job.bytes_total == 0 and job.status == JobStatus.SUCCEEDED:
            percent = 100.0
        error = None
        if job.error_message and job.status in (JobStatus.FAILED, JobStatus.CANCELLED):
            error = JobError(code=job.error_code or "error", message=job.error_message)
        return cls(
            id=job.id, kind=job.kind, status=job.status, project_id=job.project_id,
            volume=job.volume.ref if job.volume else None,
            restore_point_id=job.restore_point_id, restore_target=job.restore_target,
            qos_bytes_per_second=job.qos_bytes_per_second,
            attempt=job.attempt, max_attempts=job.max_attempts,
            progress=JobProgress(bytes_done=job.bytes_done, bytes_total=job.bytes_total,
                                 percent=percent),
            timings=JobTimings(created_at=job.created_at, started_at=job.started_at,
                               finished_at=job.finished_at, duration_seconds=duration,
                               read_seconds=job.read_seconds, write_seconds=job.write_seconds,
                               qos_wait_seconds=job.qos_wait_seconds),
            throughput_bytes_per_second=(job.bytes_done / duration) if duration else None,
            error=error,
        )
