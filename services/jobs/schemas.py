from __future__ import annotations

import json
from datetime import datetime

from pydantic import BaseModel, Field

from services.base import AnyRow, utcnow
from services.jobs.load import job_load
from services.limits.qos_bounds import BytesPerSecond, OpsPerSecond
from services.records.jobs import Job
from services.status import JobKind, JobStatus, RestoreMethod


class JobProgress(BaseModel):
    bytes_done: int
    bytes_total: int | None = Field(description="Bytes to copy; known once the copy starts")
    percent: float | None
    bytes_read: int = Field(description="Bytes this attempt read from the source")
    bytes_written: int = Field(description="Non-zero bytes this attempt wrote")
    bytes_resumed: int = Field(
        description="Part of bytes_done an earlier attempt had copied; this attempt resumed "
                    "after it instead of starting over")
    rate_bytes_per_second: float | None = Field(
        description="The copy's rate: over the last few seconds while it runs, its average "
                    "once finished")
    throughput_bytes_per_second: float | None = Field(
        deprecated=True, description="The same as rate_bytes_per_second (the old name, which "
                                     "the job's own average also had)")


class JobTimings(BaseModel):
    created_at: datetime
    started_at: datetime | None
    ready_at: datetime | None = Field(
        default=None, description="A restore: when its volume became usable. For an instant "
                                  "restore that is within seconds of the start, before the "
                                  "flatten ends (finished_at)")
    finished_at: datetime | None
    duration_seconds: float | None = Field(description="From start to finish (or now)")
    copy_seconds: float = Field(description="Wall time of the data copy itself")
    read_seconds: float = Field(description="Time spent reading, summed over parallel operations")
    write_seconds: float = Field(description="Time spent writing, summed over parallel operations")
    qos_wait_seconds: float = Field(description="Time the job waited on its QoS limit")
    engine_seconds: float = Field(
        description="Zero scanning and checksumming, summed over parallel operations")
    phases: dict[str, float] | None = Field(
        default=None,
        description="Once the job ended: seconds of its last attempt per phase. A backup: "
                    "queue_wait, claim, prepare, open, snapshot, plan, copy, manifest, "
                    "target_snapshot, commit, aftercare; a restore: queue_wait, claim, "
                    "open, copy "
                    "(instant: clone, adopt for a Cinder volume, commit, flatten)")


class JobLoad(BaseModel):
    """Share of the copy's capacity each stage kept busy, 0-100 %."""

    source: float
    target: float
    qos: float
    engine: float
    bottleneck: str = Field(description="The stage limiting the job: source, target, qos or "
                                        "engine")
    summary: str = Field(examples=["source 93% > engine 4% > target 41% (qos 0%): "
                                   "bottleneck source"])


class JobQos(BaseModel):
    bytes_per_second: int | None
    ops_per_second: int | None


class JobError(BaseModel):
    code: str
    message: str


class JobSchedule(BaseModel):
    plan_id: str
    slot_at: datetime | None = Field(description="The plan's slot (UTC); None for run-now")
    not_before: datetime | None = Field(
        description="The job does not start earlier: its slot, or the opening of the plan's "
                    "backup window")
    waiting_for_slot: bool = Field(
        description="Queued, due, and waiting for a free concurrency slot (its target's or "
                    "its project's limit is reached)")


class JobPublic(BaseModel):
    id: str
    kind: JobKind
    status: JobStatus
    project_id: str
    target: str | None = Field(description="Backup target the job writes or reads")
    schedule: JobSchedule | None = Field(description="Set when a plan made the job")
    summary: str | None = Field(description=(
        "What a finished job did, in words: a prune's removals, an instant restore's image, a "
        "backup to an object or directory target's chunks (read, sent, found stored, "
        "confirmed by an earlier attempt)"))
    volume: str | None = Field(description="cluster/pool/image of the volume")
    volume_name: str | None = Field(
        default=None, description="The Cinder volume's name, as Cairn last learnt it (when "
                                  "a backup or a plan named it); null for an RBD image")
    restore_point_id: str | None
    restore_target: str | None = Field(description="Image a restore writes to")
    restore_volume_id: str | None = Field(
        default=None, description="The Cinder volume a restore writes to (new or in place)")
    restore_method: RestoreMethod | None = Field(
        default=None, description="A restore's mode: `copy`, or `instant` (usable at "
                                  "timings.ready_at, flattened by finished_at)")
    qos: JobQos = Field(description="The job's limits; change them while it runs with PATCH")
    qos_bytes_per_second: int | None = Field(description="Same as qos.bytes_per_second")
    cancel_requested: bool
    attempt: int
    max_attempts: int
    progress: JobProgress
    timings: JobTimings
    load: JobLoad | None = Field(description="Known once the copy has started")
    average_bytes_per_second: float | None = Field(
        description="Bytes this attempt copied over the job's whole duration so far (waits, "
                    "snapshots and checks included)")
    throughput_bytes_per_second: float | None = Field(
        deprecated=True, description="The same as average_bytes_per_second (the old name)")
    error: JobError | None
    warnings: list[str] = Field(
        default_factory=list,
        description="Steps after the job's commit point that failed and were left (for "
                    "example a source snapshot someone protected); the job's result stands")

    @classmethod
    def of(cls, job: Job | AnyRow, volume_ref: str | None = None,
           volume_name: str | None = None) -> JobPublic:
        """From the ORM object, or from a list page's row (`volume_ref` and `volume_name`
        then given)."""
        duration = None
        if job.started_at is not None:
            duration = ((job.finished_at or utcnow()) - job.started_at).total_seconds()
        percent = None
        if job.bytes_total:
            percent = round(100.0 * job.bytes_done / job.bytes_total, 1)
        elif job.bytes_total == 0 and job.status == JobStatus.SUCCEEDED:
            percent = 100.0
        error = None
        if job.error_message and job.status in (JobStatus.FAILED, JobStatus.CANCELLED,
                                                JobStatus.SKIPPED):
            error = JobError(code=job.error_code or "error", message=job.error_message)
        schedule = None
        if job.plan_id is not None:
            due = job.not_before is None or job.not_before <= utcnow()
            schedule = JobSchedule(plan_id=job.plan_id, slot_at=job.slot_at,
                                   not_before=job.not_before,
                                   waiting_for_slot=job.status == JobStatus.QUEUED and due
                                   and job.sent_at is None)
        average = ((job.bytes_done - (job.bytes_resumed or 0)) / duration if duration
                   else None)
        return cls(
            id=job.id, kind=job.kind, status=job.status, project_id=job.project_id,
            target=job.target, schedule=schedule, summary=job.summary,
            volume=(job.volume.ref if job.volume else None) if isinstance(job, Job)
            else volume_ref,
            volume_name=(job.volume.name if job.volume else None) if isinstance(job, Job)
            else volume_name,
            restore_point_id=job.restore_point_id, restore_target=job.restore_target,
            restore_volume_id=job.restore_cinder_volume_id,
            restore_method=job.restore_method if job.kind == JobKind.RESTORE else None,
            qos=JobQos(bytes_per_second=job.qos_bytes_per_second,
                       ops_per_second=job.qos_ops_per_second),
            qos_bytes_per_second=job.qos_bytes_per_second,
            cancel_requested=job.cancel_requested_at is not None,
            attempt=job.attempt, max_attempts=job.max_attempts,
            progress=JobProgress(bytes_done=job.bytes_done, bytes_total=job.bytes_total,
                                 percent=percent, bytes_read=job.bytes_read or 0,
                                 bytes_written=job.bytes_written or 0,
                                 bytes_resumed=job.bytes_resumed or 0,
                                 rate_bytes_per_second=job.rate_bytes_per_second,
                                 throughput_bytes_per_second=job.rate_bytes_per_second),
            timings=JobTimings(created_at=job.created_at, started_at=job.started_at,
                               ready_at=job.ready_at,
                               finished_at=job.finished_at, duration_seconds=duration,
                               copy_seconds=job.copy_seconds or 0.0,
                               read_seconds=job.read_seconds, write_seconds=job.write_seconds,
                               qos_wait_seconds=job.qos_wait_seconds,
                               engine_seconds=job.engine_seconds or 0.0,
                               phases=json.loads(job.phase_seconds)
                               if job.phase_seconds else None),
            load=_load(job),
            average_bytes_per_second=average,
            throughput_bytes_per_second=average,
            error=error,
            warnings=json.loads(job.warnings) if job.warnings else [],
        )


def _load(job: Job | AnyRow) -> JobLoad | None:
    load = job_load(copy_seconds=job.copy_seconds or 0.0, window=job.copy_window,
                    read_seconds=job.read_seconds, write_seconds=job.write_seconds,
                    qos_wait_seconds=job.qos_wait_seconds,
                    engine_seconds=job.engine_seconds or 0.0)
    if load is None:
        return None
    pct = {s: round(100 * getattr(load, s), 1) for s in ("source", "target", "qos", "engine")}
    summary = (f"source {pct['source']:.0f}% > engine {pct['engine']:.0f}% > target "
               f"{pct['target']:.0f}% (qos {pct['qos']:.0f}%): bottleneck {load.bottleneck}")
    return JobLoad(**pct, bottleneck=load.bottleneck, summary=summary)


class JobUpdate(BaseModel):
    """New QoS limits for a queued or running job; a running copy follows within a second.
    Send null to remove a limit; leave a field out to keep it."""

    qos_bytes_per_second: BytesPerSecond | None = None
    qos_ops_per_second: OpsPerSecond | None = None


class JobList(BaseModel):
    jobs: list[JobPublic]
    next_marker: str | None = Field(description="Pass as `marker` for the next page; None on "
                                                "the last one")
