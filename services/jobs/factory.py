"""One way to make each kind of job. Every function returns the complete values of a new
`jobs` row: the ORM takes them (`Job(**values)`) and so do bulk inserts, which do not run
the ORM's column defaults. A kind's required fields are its parameters; nothing else
decides what a new job looks like."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from services.base import new_id, utcnow
from services.records.restore_points import RestorePoint
from services.status import JobKind, JobStatus, RestorePointKind

JobValues = dict[str, Any]


@dataclass(frozen=True)
class Qos:
    """A job's pacing: bytes and operations per second, either, both or neither."""

    bytes_per_second: int | None = None
    ops_per_second: int | None = None


NO_QOS = Qos()


def backup(*, project_id: str, volume_id: str, target: str, kind: RestorePointKind | None,
           max_attempts: int, qos: Qos = NO_QOS, restore_point_id: str | None = None,
           plan_id: str | None = None, slot_at: datetime | None = None,
           not_before: datetime | None = None, now: datetime | None = None,
           group_id: str | None = None) -> JobValues:
    """A backup of a volume to a target. On demand its restore point exists already; a
    plan's backup makes it when the job starts (`kind` says which kind to make). A run of
    a group plan shares `group_id` (its restore point group)."""
    return _row(JobKind.BACKUP, project_id, max_attempts, qos, now, volume_id=volume_id,
                target=target, backup_kind=kind, restore_point_id=restore_point_id,
                plan_id=plan_id, slot_at=slot_at, not_before=not_before, group_id=group_id)


def restore(rp: RestorePoint, *, max_attempts: int, qos: Qos = NO_QOS) -> JobValues:
    """A restore of `rp`; the caller sets where it writes (target, mode, Cinder volume)."""
    return _row(JobKind.RESTORE, rp.project_id, max_attempts, qos, None,
                volume_id=rp.volume_id, restore_point_id=rp.id, target=rp.target)


def delete(rp: RestorePoint, *, max_attempts: int) -> JobValues:
    return _row(JobKind.DELETE, rp.project_id, max_attempts, NO_QOS, None,
                volume_id=rp.volume_id, restore_point_id=rp.id)


def verify(rp: RestorePoint, *, max_attempts: int, fraction: float | None,
           qos: Qos = NO_QOS, plan_id: str | None = None,
           now: datetime | None = None) -> JobValues:
    """A verify of `rp`: all of it, or `fraction` of its objects chosen at random."""
    return _row(JobKind.VERIFY, rp.project_id, max_attempts, qos, now,
                volume_id=rp.volume_id, restore_point_id=rp.id, target=rp.target,
                verify_fraction=fraction, plan_id=plan_id)


def copy(rp: RestorePoint, *, max_attempts: int, qos: Qos = NO_QOS,
         plan_id: str | None = None, now: datetime | None = None) -> JobValues:
    """A copy into `rp` (a new restore point on an object target, `creating`) of the
    restore point it names in `copied_from_restore_point_id`."""
    return _row(JobKind.COPY, rp.project_id, max_attempts, qos, now,
                volume_id=rp.volume_id, restore_point_id=rp.id, target=rp.target,
                plan_id=plan_id)


def prune(*, project_id: str, plan_id: str, max_attempts: int,
          now: datetime | None = None) -> JobValues:
    return _row(JobKind.PRUNE, project_id, max_attempts, NO_QOS, now, plan_id=plan_id)


def ended(values: JobValues, status: JobStatus, code: str, message: str) -> JobValues:
    """`values` as a job that ended without running (a slot skipped or refused): the
    history shows it with the reason."""
    return {**values, "status": status, "error_code": code, "error_message": message,
            "finished_at": values["queued_at"]}


def _row(kind: JobKind, project_id: str, max_attempts: int, qos: Qos, now: datetime | None,
         **fields: Any) -> JobValues:
    now = now or utcnow()
    row: JobValues = {
        "id": new_id(), "kind": kind, "project_id": project_id, "status": JobStatus.QUEUED,
        "created_at": now, "queued_at": now, "attempt": 0, "max_attempts": max_attempts,
        "qos_bytes_per_second": qos.bytes_per_second, "qos_ops_per_second": qos.ops_per_second,
        "bytes_done": 0, "read_seconds": 0.0, "write_seconds": 0.0, "qos_wait_seconds": 0.0,
        "engine_seconds": 0.0, "copy_seconds": 0.0, "bytes_read": 0, "bytes_written": 0,
        "bytes_resumed": 0, "volume_id": None, "restore_point_id": None, "target": None,
        "backup_kind": None, "plan_id": None, "slot_at": None, "not_before": None,
        "error_code": None, "error_message": None, "summary": None, "finished_at": None,
        "warnings": None, "verify_fraction": None, "group_id": None,
    }
    unknown = fields.keys() - row.keys()
    if unknown:  # a typo here would otherwise become a silent None column
        raise TypeError(f"not a job field: {sorted(unknown)}")
    row.update(fields)
    return row
