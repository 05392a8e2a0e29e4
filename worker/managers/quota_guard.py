"""A restore point being written stays within its project's storage quota, and its commit
and a delete leave its chain's figures exact (`services/quotas/chains.py`).

While the job writes, its reservation is raised to what it wrote at each progress write;
the raise that would take the project past its limit is refused and stops this job with
`quota_exceeded` (its undo removes what it wrote), while other jobs of the project that fit
go on. Before its data is made final (the manifest, the target snapshot), the reservation is
set to what the restore point will count, measured on the target, and checked the same way;
the commit then writes the chain's figures and the status in one unit of work, admitted only
if the project still fits. So no restore point is ever kept over the limit."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from services.errors import TargetKeyChanged, TargetKeyMissing, TargetKeyUnavailable
from services.quotas import chains
from services.quotas import service as quotas
from services.records.restore_points import RestorePoint
from services.status import RESTORE_POINT_TRANSITIONS, RestorePointStatus, guarded_update
from worker.engine.copy import CopyStats
from worker.managers.signals import JobLost
from worker.runtime import Runtime

log = logging.getLogger(__name__)

Written = Callable[[CopyStats], int]
"""What a job has written of its restore point so far, in the quota's terms, from the
copy's progress."""


class QuotaGuard:
    def __init__(self, rt: Runtime, rp: RestorePoint, written: Written | None = None) -> None:
        """`written`: by default the bytes the copy engine wrote."""
        self.rt, self.rp = rt, rp
        self.written: Written = written or (lambda stats: stats.bytes_written)
        self.earlier = 0
        """What an earlier attempt wrote (a resumed backup's part of the image)."""
        with rt.db.session() as session:
            self.limited = quotas.has_storage_limit(session, rp.project_id)
        self.reserved = 0

    def progress(self, stats: CopyStats) -> None:
        """With each progress write: what the job wrote so far against the project's room."""
        held = self.earlier + self.written(stats)
        if self.limited and held > self.reserved:
            self._reserve(held, exactly=False)

    def settle(self, measure: chains.Measure) -> None:
        """The restore point's figure as it will be committed, checked whether or not a limit
        was set when the job started (an administrator may have set one meanwhile)."""
        rp = self.rp
        needed = chains.needed_to_commit(self.rt.db, measure, rp.volume_id, rp.target, rp.id)
        self._reserve(needed, exactly=True)

    def _reserve(self, held: int, *, exactly: bool) -> None:
        with self.rt.db.session() as session:
            quotas.reserve(session, self.rp.project_id, self.rp.id, held, exactly=exactly)
        self.reserved = held


def commit(rt: Runtime, rp: RestorePoint, measure: chains.Measure,
           values: dict[str, Any]) -> None:
    """`creating -> available` with `values`, and the chain's figures with it, admitted
    only if the project's storage still fits (QuotaExceeded otherwise: nothing changes)."""

    def apply(session: Any, growth: int) -> None:
        quotas.admit(session, rp.project_id, growth)
        if not guarded_update(session, RestorePoint, rp.id, RESTORE_POINT_TRANSITIONS,
                              RestorePointStatus.AVAILABLE, expect=RestorePointStatus.CREATING,
                              extra=values):
            raise JobLost(f"restore point {rp.id} is no longer being created")

    chains.settle(rt.db, measure, rp.volume_id, rp.target,
                  chains.Change(adding=rp.id, apply=apply))


def settle_deleted(rt: Runtime, rp: RestorePoint, values: dict[str, Any],
                   measure: Callable[[], chains.Measure]) -> None:
    """`deleting -> deleted` with `values` once `rp`'s data is gone, and its chain's
    figures with it, as `measure()` finds them on the target (`DataPath.measure`)."""

    def apply(session: Any, _growth: int) -> None:
        if not guarded_update(session, RestorePoint, rp.id, RESTORE_POINT_TRANSITIONS,
                              RestorePointStatus.DELETED, expect=RestorePointStatus.DELETING,
                              extra=values):
            raise JobLost(f"restore point {rp.id} is no longer being deleted")

    try:
        measured = measure()
    except (TargetKeyMissing, TargetKeyChanged, TargetKeyUnavailable) as exc:
        # A restore point is deleted even from a target whose key is lost (its manifest
        # goes without a key); its chain cannot be measured until the key is back.
        log.warning("restore point %s deleted from %s without measuring its chain: %s",
                    rp.id, rp.target, exc)
        chains.hand_on(rt.db, rp.volume_id, rp.target, rp.id, apply)
        return
    chains.settle(rt.db, measured, rp.volume_id, rp.target,
                  chains.Change(removing=rp.id, apply=apply))

