"""One way to make each kind of restore point, as `services/jobs/factory.py` makes jobs.
Every function returns the values of a new row: the ORM takes them (`RestorePoint(**values)`)
and so do bulk inserts, which do not run the ORM's column defaults, so every column with a
default is given here. A kind's required fields are its parameters; nothing else decides
what a new restore point looks like.

A restore point starts `creating` and holds `room`: the bytes it reserves against its
project's storage quota until it is committed (`services/quotas/`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from services.base import new_id, utcnow
from services.records.restore_points import RestorePoint
from services.status import RestorePointKind, RestorePointStatus

RestorePointValues = dict[str, Any]


def backup(*, project_id: str, volume_id: str, target: str, kind: RestorePointKind,
           room: int, plan_id: str | None = None, group_id: str | None = None,
           now: datetime | None = None) -> RestorePointValues:
    """What a backup of the volume to `target` is about to write, as `kind` (an
    incremental that finds no base becomes a full, and says why). An on-demand backup
    makes it with its job; a plan's backup when its job starts (`worker/managers/claim.py`),
    so a job waiting for its window or a free slot holds none. `group_id`: the run of a
    group plan it belongs to."""
    return {"id": new_id(), "project_id": project_id, "volume_id": volume_id,
            "target": target, "kind": kind, "status": RestorePointStatus.CREATING,
            "quota_bytes": room, "plan_id": plan_id, "group_id": group_id,
            "copied_from_restore_point_id": None, "source_bootable": None,
            "created_at": now or utcnow()}


def copy(source: RestorePoint, *, target: str, room: int,
         plan_id: str | None = None) -> RestorePointValues:
    """A copy of `source` on `target` (off site), written by a copy job from the backup
    pool: it holds the volume at its source's instant, so it is dated then and belongs to
    its source's group; it is whole on its own (a full, whatever its source's kind), and
    a restore from it makes a bootable Cinder volume when its source would."""
    return {"id": new_id(), "project_id": source.project_id, "volume_id": source.volume_id,
            "target": target, "kind": RestorePointKind.FULL,
            "status": RestorePointStatus.CREATING, "quota_bytes": room, "plan_id": plan_id,
            "group_id": source.group_id, "copied_from_restore_point_id": source.id,
            "source_bootable": source.source_bootable, "created_at": source.created_at}


def group(*, project_id: str, plan_id: str, now: datetime, slot_at: datetime | None = None,
          group_id: str | None = None) -> RestorePointValues:
    """A run of a group plan (`RestorePointGroup`): one RBD group snapshot its backups
    share. A scheduled run has its slot and an id every scheduler replica derives alike
    (`services/scheduler/planner.run_group_id`); a run-now has neither."""
    return {"id": group_id or new_id(), "project_id": project_id, "plan_id": plan_id,
            "slot_at": slot_at, "created_at": now}
