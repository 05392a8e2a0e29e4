"""One way to make each kind of job. Every function returns the complete values of a new
`jobs` row: the ORM takes them (`Job(**values)`) and so do bulk inserts, which do not run
the ORM's column defaults. A kind's required fields are its parameters; nothing else
decides what a new job looks like, and nothing is set on a job after it is made (a
restore's destination is a parameter like the rest: `RestoreDestination`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, assert_never

from services.base import new_id, utcnow
from services.records.restore_points import RestorePoint
from services.status import JobKind, JobStatus, RestoreMethod, RestoreMode, RestorePointKind

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


@dataclass(frozen=True)
class NewImage:
    """A new RBD image (`cluster/pool/image`), made by the restore: copied into, or an
    instant restore's clone renamed to it."""

    image: str
    method: RestoreMethod = RestoreMethod.COPY


@dataclass(frozen=True)
class NewVolume:
    """A new Cinder volume, made while the user waited (deleted again if the restore fails
    before it is ready), copied into through its RBD image `image`."""

    volume_id: str
    image: str


@dataclass(frozen=True)
class InPlace:
    """An existing, detached Cinder volume, written over through its RBD image `image` (a
    restore in place is always a copy: the volume keeps its identity and attachments)."""

    volume_id: str
    image: str


@dataclass(frozen=True)
class HeldByCinderBackup:
    """The Cinder volume Cinder's backup service holds for its own restore (Cairn's Cinder
    backup driver), written over through its RBD image `image`; Cinder keeps its status."""

    volume_id: str
    image: str


@dataclass(frozen=True)
class AdoptedVolume:
    """An instant restore into a new Cinder volume: the backup snapshot is cloned as
    `clone` (`cluster/pool/image`, named after the job), and Cinder adopts the clone as the
    volume `volume` describes (JSON of its name, size, type and description)."""

    clone: str
    volume: str


RestoreDestination = NewImage | NewVolume | InPlace | HeldByCinderBackup | AdoptedVolume
"""Where a restore writes and how. Each kind of destination allows only the methods that
work for it, so a restore job cannot be made half-described or contradictory."""


def restore(rp: RestorePoint, into: RestoreDestination, *, max_attempts: int,
            qos: Qos = NO_QOS, job_id: str | None = None) -> JobValues:
    """A restore of `rp` into `into`. `job_id` when the destination was named after the
    job before it was made (an instant restore's clone, a new Cinder volume's metadata)."""
    where: dict[str, Any]
    match into:
        case NewImage(image, method):
            where = {"restore_target": image, "restore_method": method}
        case NewVolume(volume_id, image):
            where = {"restore_target": image, "restore_mode": RestoreMode.NEW_VOLUME,
                     "restore_cinder_volume_id": volume_id}
        case InPlace(volume_id, image):
            where = {"restore_target": image, "restore_mode": RestoreMode.IN_PLACE,
                     "restore_cinder_volume_id": volume_id}
        case HeldByCinderBackup(volume_id, image):
            where = {"restore_target": image, "restore_mode": RestoreMode.CINDER_BACKUP,
                     "restore_cinder_volume_id": volume_id}
        case AdoptedVolume(clone, volume):
            # Cinder renames the clone volume-<id> when it adopts it: the worker records
            # the volume and its image then.
            where = {"restore_target": clone, "restore_mode": RestoreMode.NEW_VOLUME,
                     "restore_method": RestoreMethod.INSTANT, "restore_volume_spec": volume}
        case _:
            assert_never(into)
    return _row(JobKind.RESTORE, rp.project_id, max_attempts, qos, None,
                id=job_id or new_id(), volume_id=rp.volume_id, restore_point_id=rp.id,
                target=rp.target, **where)


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
        "restore_target": None, "restore_mode": None, "restore_cinder_volume_id": None,
        "restore_method": RestoreMethod.COPY, "restore_volume_spec": None,
    }
    unknown = fields.keys() - row.keys()
    if unknown:  # a typo here would otherwise become a silent None column
        raise TypeError(f"not a job field: {sorted(unknown)}")
    row.update(fields)
    return row
