"""What an orphan scan of any target shares: the findings and the report, the rows the
names lead back to, the rule that says when a restore point's data is garbage, and the one
place a finding is acted on. Each kind scans its own names (`Target.scan_orphans`); the
reconciler (`services/restore_points/orphans.py`) runs the scans and the source volumes'."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy import select

from services.db import Database
from services.errors import StorageError
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import RESTORE_POINT_TRANSITIONS, RestorePointStatus, guarded_update
from services.storage.ceph import CephClusters

log = logging.getLogger(__name__)

Action = Literal["remove", "flag", "report"]


@dataclass(frozen=True)
class Finding:
    action: Action
    what: str
    """backup snapshot, backup image, manifest, checkpoint, source snapshot, restore point"""
    location: str
    """cluster/pool/name[@snapshot]"""
    reason: str
    """The row it did not find, or what is wrong with the row it found."""
    restore_point_id: str | None = None


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    applied: bool = False
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Row:
    id: str
    project_id: str
    volume_id: str
    target: str
    status: RestorePointStatus
    ever_available: bool
    locked: bool


def gone(row: Row | None) -> str | None:
    """Why a restore point's objects are garbage, or None when a row owns them."""
    if row is None:
        return "no restore point row"
    if row.locked:
        return None
    if row.status == RestorePointStatus.DELETED:
        return f"restore point {row.id} is deleted"
    if row.status == RestorePointStatus.ERROR and not row.ever_available:
        return f"restore point {row.id} failed before it was available"
    return None


@dataclass
class OrphanScan:
    """One run of the reconciler: what it found so far, whether it acts (`apply`), and
    the time before which an object is old enough to be judged (`cutoff`), and the time
    each target's scan may take (`target_seconds`, CAIRN_ORPHAN_SCAN_TARGET_SECONDS)."""

    db: Database
    clusters: CephClusters
    report: Report
    apply: bool
    cutoff: datetime
    target_seconds: float

    def target_deadline(self) -> float:
        """When a target's scan starting now must have ended (`time.monotonic()`): whoever
        holds its storage can make a listing go on for ever, and the scan runs in the
        scheduler's tick."""
        return time.monotonic() + self.target_seconds

    def out_of_time(self, target: str) -> StorageError:
        """What a target's scan that ran out of its time fails with (the reconciler reports
        it and goes on to the other targets)."""
        log.warning("orphan scan of target %s did not end within %.0f s: stopped", target,
                    self.target_seconds)
        return StorageError(
            f"the orphan scan of target {target!r} did not end within {self.target_seconds:.0f}"
            " s (CAIRN_ORPHAN_SCAN_TARGET_SECONDS): stopped where it was, nothing on it "
            "flagged; a store that slow, or one that lists for ever, is not scanned")

    def note(self, finding: Finding) -> None:
        """A finding that is only reported: nothing is done about it."""
        self.report.findings.append(finding)

    def act(self, finding: Finding, action: Callable[[], object]) -> None:
        """Record `finding` and, when the run applies, do `action`: a failure is recorded,
        never raised (the next finding goes on)."""
        self.report.findings.append(finding)
        if not self.apply:
            return
        try:
            action()
        except Exception as exc:
            log.warning("orphan reconciler could not %s %s %s", finding.action, finding.what,
                        finding.location, exc_info=True)
            self.report.errors.append(f"{finding.location}: {type(exc).__name__}: {exc}")
            return
        log.warning("orphan reconciler: %s %s %s (%s)",
                    "flagged" if finding.action == "flag" else "removed", finding.what,
                    finding.location, finding.reason)

    def failed(self, where: str, exc: Exception) -> None:
        """A part of the scan that could not be read: recorded, and the others go on."""
        self.report.errors.append(f"{where}: {type(exc).__name__}: {exc}")

    # -- rows ---------------------------------------------------------------------------
    def rows(self, ids: Iterable[str]) -> dict[str, Row]:
        wanted = sorted(set(ids))
        rows: dict[str, Row] = {}
        now = datetime.now(UTC)
        with self.db.session() as session:
            for start in range(0, len(wanted), 500):
                for rp in session.scalars(select(RestorePoint).where(
                        RestorePoint.id.in_(wanted[start:start + 500]))):
                    rows[rp.id] = _row(rp, now)
        return rows

    def volume_ids(self, ids: list[str]) -> set[str]:
        with self.db.session() as session:
            return set(session.scalars(select(Volume.id).where(Volume.id.in_(ids)))) \
                if ids else set()

    def live_backups(self, targets: set[str]) -> set[str]:
        """Volumes with a restore point being created on these targets."""
        with self.db.session() as session:
            return set(session.scalars(select(RestorePoint.volume_id).where(
                RestorePoint.target.in_(targets),
                RestorePoint.status == RestorePointStatus.CREATING)))

    def available(self, targets: set[str], before: datetime) -> Iterator[RestorePoint]:
        with self.db.session() as session:
            rows = list(session.scalars(select(RestorePoint).where(
                RestorePoint.target.in_(targets),
                RestorePoint.status == RestorePointStatus.AVAILABLE,
                RestorePoint.completed_at < before)))
            session.expunge_all()
        yield from rows

    def flag(self, rp_id: str, reason: str) -> None:
        """An available restore point whose data is gone becomes `error`, saying why."""
        with self.db.session() as session:
            guarded_update(session, RestorePoint, rp_id, RESTORE_POINT_TRANSITIONS,
                           RestorePointStatus.ERROR, expect=RestorePointStatus.AVAILABLE,
                           extra={"status_reason": reason})


def _row(rp: RestorePoint, now: datetime) -> Row:
    return Row(rp.id, rp.project_id, rp.volume_id, rp.target, rp.status,
               rp.completed_at is not None,
               rp.locked_until is not None and rp.locked_until > now)
