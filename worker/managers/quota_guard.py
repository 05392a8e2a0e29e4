"""A restore point being written stays within its project's storage quota: as the job
writes past what its restore point reserved, the reservation is raised to what it wrote and
the project's usage checked; over the limit, the job stops with `quota_exceeded` and its
undo removes what it wrote. The final figure is checked the same way just before the
restore point turns `available`, so none is ever kept over the limit, whatever other jobs
of the project wrote meanwhile (`services/quotas/service.py` says why this is race-free)."""

from __future__ import annotations

from services.errors import QuotaExceeded
from services.quotas import service as quotas
from worker.engine.copy import CopyStats
from worker.runtime import Runtime


class QuotaGuard:
    def __init__(self, rt: Runtime, rp_id: str, project_id: str) -> None:
        self.rt, self.rp_id, self.project_id = rt, rp_id, project_id
        with rt.db.session() as session:
            self.limited = quotas.has_storage_limit(session, project_id)
        self.reserved = 0

    def progress(self, stats: CopyStats) -> None:
        """With each progress write: what the job wrote so far (an earlier attempt's part
        included) against the project's room."""
        held = stats.bytes_written + stats.bytes_resumed
        if self.limited and held > self.reserved:
            self._check(held, exactly=False)

    def settle(self, held: int) -> None:
        """The restore point's final figure, checked whether or not a limit was set when
        the job started (an administrator may have set one meanwhile)."""
        self._check(held, exactly=True)

    def _check(self, held: int, *, exactly: bool) -> None:
        # Two transactions: the reservation is committed before usage is read.
        with self.rt.db.session() as session:
            quotas.reserve(session, self.rp_id, held, exactly=exactly)
        with self.rt.db.session() as session:
            reason = quotas.excess(session, self.project_id)
        if reason is not None:
            raise QuotaExceeded(reason, project_id=self.project_id)
        self.reserved = held
