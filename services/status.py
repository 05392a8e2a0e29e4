"""Status enums and the transitions each allows. Every status change goes through
`guarded_update`, an UPDATE ... WHERE status IN (allowed sources), so two processes can never
both move a row out of the same state (a duplicate task delivery finds nothing to do)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeVar

from sqlalchemy import update
from sqlalchemy.orm import Session

from services.base import Base
from services.errors import InvalidStatusTransition


class JobKind(enum.StrEnum):
    BACKUP = "backup"
    RESTORE = "restore"
    DELETE = "delete"
    VERIFY = "verify"
    PRUNE = "prune"
    COPY = "copy"
    """An available restore point sent from its RBD target to an object target."""


class RestoreMode(enum.StrEnum):
    NEW_VOLUME = "new_volume"
    """Into a Cinder volume Cairn created for the restore (deleted again if it fails)."""
    IN_PLACE = "in_place"
    """Over an existing, detached Cinder volume (held in `maintenance` meanwhile)."""
    CINDER_BACKUP = "cinder_backup"
    """Over the Cinder volume Cinder's backup service holds for its own restore (status
    `restoring-backup`, set and set back by Cinder; Cairn's Cinder backup driver asks)."""


class RestoreMethod(enum.StrEnum):
    COPY = "copy"
    """The restore copies every byte before the volume is handed over."""
    INSTANT = "instant"
    """The volume is a clone of the backup snapshot, usable at once; a flatten then copies
    the rest in the background while the restore point stays pinned."""


class Consistency(enum.StrEnum):
    VOLUME = "volume"
    """Each volume's backup takes its own snapshot when it starts."""
    GROUP = "group"
    """One RBD group snapshot over all the plan's volumes per run: the restore points of a
    run hold the volumes at one instant (crash-consistent together)."""


class JobStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    """A scheduled slot that did not run (missed while the scheduler was down, or its
    volume's previous backup still queued or running); the job says why."""


class PlanStatus(enum.StrEnum):
    ENABLED = "enabled"
    PAUSED = "paused"


class RestorePointStatus(enum.StrEnum):
    CREATING = "creating"
    AVAILABLE = "available"
    ERROR = "error"
    DELETING = "deleting"
    DELETED = "deleted"


class VerifyStatus(enum.StrEnum):
    OK = "ok"
    CORRUPT = "corrupt"


class RestorePointKind(enum.StrEnum):
    FULL = "full"
    INCREMENTAL = "incremental"


class DeliveryStatus(enum.StrEnum):
    """Where an event's delivery to a webhook, or to the cloud's notification bus, stands."""

    PENDING = "pending"
    """An attempt is due at `next_attempt_at`, or in flight."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """For good: its last attempt failed, its webhook was disabled before it went out, or
    Cairn could not sign it within a delivery's whole retry span."""


S = TypeVar("S", bound=enum.StrEnum)

ACTIVE_JOB_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)
COPY_JOB_KINDS = (JobKind.BACKUP, JobKind.RESTORE, JobKind.VERIFY, JobKind.COPY)
"""Jobs that move data (the copy engine, or an off-site copy's upload): they hold
concurrency slots, have QoS limits and can be cancelled."""

JOB_TRANSITIONS: Mapping[JobStatus, frozenset[JobStatus]] = {
    JobStatus.QUEUED: frozenset({JobStatus.RUNNING, JobStatus.CANCELLED, JobStatus.FAILED}),
    # running -> queued: the reconciler hands a job whose worker died to another worker.
    JobStatus.RUNNING: frozenset(
        {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.QUEUED}
    ),
    JobStatus.SUCCEEDED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELLED: frozenset(),
    JobStatus.SKIPPED: frozenset(),
}

RESTORE_POINT_TRANSITIONS: Mapping[RestorePointStatus, frozenset[RestorePointStatus]] = {
    # creating -> deleted: a cancelled backup, whose partial copy was removed.
    RestorePointStatus.CREATING: frozenset(
        {RestorePointStatus.AVAILABLE, RestorePointStatus.ERROR, RestorePointStatus.DELETED}
    ),
    # available -> error: the orphan reconciler found its backup snapshot or manifest
    # gone (removed outside Cairn); it can no longer be restored, and saying so is the
    # only honest state. Nothing else moves an available restore point but a delete.
    RestorePointStatus.AVAILABLE: frozenset({RestorePointStatus.DELETING,
                                             RestorePointStatus.ERROR}),
    RestorePointStatus.ERROR: frozenset({RestorePointStatus.DELETING}),
    # deleting -> available: the delete was refused before it removed anything (the backup
    # snapshot still backs an instant restore's clone); the restore point is whole.
    RestorePointStatus.DELETING: frozenset({RestorePointStatus.DELETED, RestorePointStatus.ERROR,
                                            RestorePointStatus.AVAILABLE}),
    RestorePointStatus.DELETED: frozenset(),
}


DELIVERY_TRANSITIONS: Mapping[DeliveryStatus, frozenset[DeliveryStatus]] = {
    # A failed attempt that will be retried is no transition: the delivery stays pending
    # and only its next attempt's time moves. Nothing ended is sent again: a new event is
    # a new delivery.
    DeliveryStatus.PENDING: frozenset({DeliveryStatus.SUCCEEDED, DeliveryStatus.FAILED}),
    DeliveryStatus.SUCCEEDED: frozenset(),
    DeliveryStatus.FAILED: frozenset(),
}


def sources_of(transitions: Mapping[S, frozenset[S]], target: S) -> list[S]:
    """The statuses from which `target` may be reached."""
    return [source for source, targets in transitions.items() if target in targets]


def guarded_update(
    session: Session,
    model: type[Base],
    row_id: str,
    transitions: Mapping[S, frozenset[S]],
    to: S,
    *,
    expect: S | None = None,
    extra: Mapping[str, Any] | None = None,
    where: tuple[Any, ...] = (),
) -> bool:
    """Move one row to `to` if its current status allows it (and equals `expect` when given).
    Returns False when no row matched: another process got there first."""
    table: Any = model
    return guarded_update_where(session, model, transitions, to, expect=expect, extra=extra,
                                where=(table.id == row_id, *where)) == 1


def guarded_update_where(
    session: Session,
    model: type[Base],
    transitions: Mapping[S, frozenset[S]],
    to: S,
    *,
    expect: S | None = None,
    extra: Mapping[str, Any] | None = None,
    where: tuple[Any, ...] = (),
) -> int:
    """`guarded_update` for every row that matches `where`; returns how many moved."""
    allowed = [expect] if expect is not None else sources_of(transitions, to)
    if expect is not None and to not in transitions[expect]:
        raise InvalidStatusTransition(f"{model.__name__} cannot go from {expect} to {to}")
    table: Any = model
    stmt = (
        update(model)
        .where(table.status.in_(allowed), *where)
        .values(status=to, **(extra or {}))
        .execution_options(synchronize_session=False)
    )
    result = session.execute(stmt)
    return int(getattr(result, "rowcount", 0))
