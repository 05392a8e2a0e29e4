"""What each restore point of a chain counts against its project's storage quota, kept equal
to what the chain's restore points hold on the target, whatever is deleted in whatever order.

A chain is one volume's restore points on one target, in order of their instant (created_at,
then id). Each committed restore point that still holds data counts the data it holds that
the previous one still held does not (`Measure.beyond`), and records which one that was
(`quota_basis_id`). The sum over a chain is then exactly what the target holds for it:

- RBD target (one backup image per volume, each restore point a snapshot): an object
  version is held by an unbroken run of snapshots, from the one that wrote it to the one
  before the next that rewrote it (a full rewrites every object), so it is counted once, at
  the first held snapshot of its run: what `rbd du` reports, object by object.
- Object target (manifests naming content-addressed chunks): a chunk is counted at every
  held restore point whose predecessor does not name it (docs/scheduling.md says what that
  means for chunks that come back, and for chunks other volumes share).

When the chain changes (a restore point committed, one deleted, one found gone), the figures
whose predecessor changed are measured again on the target, outside any transaction, and
written in one unit of work that holds the chain's lock (its volume's row) and checks that
the chain is still the one measured; a chain that changed meanwhile is measured again. The
change itself (the status move) is made in that same unit of work, so a figure never counts
a restore point that is no longer there, nor two concurrent deletes lose one another."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.db import Database, lock_row
from services.errors import CairnError, NotFound
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import RestorePointStatus

log = logging.getLogger(__name__)

HOLDING = (RestorePointStatus.AVAILABLE, RestorePointStatus.DELETING, RestorePointStatus.ERROR)
"""Statuses of a committed restore point whose data may be on its target (an `error` one
failed a delete, or was found damaged). Whether it is there, `Measure.present` says."""

ATTEMPTS = 8
"""Times a chain is measured again when another job changed it meanwhile."""


@dataclass(frozen=True)
class Point:
    """A restore point as a measure sees it."""

    id: str
    project_id: str
    volume_id: str
    target: str
    size_bytes: int | None
    """The image's size as recorded (None: not recorded): it bounds what is read of the
    point's manifest."""

    @classmethod
    def of(cls, rp: RestorePoint) -> Point:
        return cls(rp.id, rp.project_id, rp.volume_id, rp.target, rp.size_bytes)


class Measure(Protocol):
    """What a chain's restore points hold on their target (one implementation per kind of
    target, in the worker)."""

    def present(self, points: Sequence[Point]) -> set[str]:
        """The ids of those whose data is on the target."""

    def beyond(self, previous: Point | None, point: Point) -> int:
        """Bytes `point` holds that `previous` does not (all its data when None). NotFound
        when either is gone."""


class ChainChanging(CairnError):
    """The chain kept changing while it was measured."""

    code = "chain_changing"


@dataclass
class Change:
    """What a unit of work does to a chain along with its figures.

    `adding`: the id of a `creating` restore point being committed (measured as if it
    were held).
    `removing`: the id of a `deleting` restore point whose data is gone.
    `apply(session, growth)`: runs inside the locked unit of work after the figures are
    written, with how much they grew the project's total: the status move (a guarded
    update), and for a commit the quota's admission. Raising rolls everything back."""

    adding: str | None = None
    removing: str | None = None
    apply: Callable[[Session, int], None] | None = None


def holds_data(rp: RestorePoint) -> bool:
    return rp.status in HOLDING and rp.completed_at is not None


def chain_rows(session: Session, volume_id: str, target: str) -> list[RestorePoint]:
    """The chain's restore points that are not deleted, oldest first."""
    return list(session.scalars(
        select(RestorePoint)
        .where(RestorePoint.volume_id == volume_id, RestorePoint.target == target,
               RestorePoint.status != RestorePointStatus.DELETED)
        .order_by(RestorePoint.created_at, RestorePoint.id)))


@dataclass(frozen=True)
class _Plan:
    signature: tuple[tuple[object, ...], ...]
    held: list[str]
    """Ids of the restore points that hold data after the change, in order."""
    terms: dict[str, tuple[str | None, int]]
    """Restore point id -> (its new basis, its figure), for those measured again."""


def settle(db: Database, measure: Measure, volume_id: str, target: str,
           change: Change | None = None) -> None:
    """Make the chain's figures exact again, with `change` made in the same unit of work."""
    change = change or Change()
    for _ in range(ATTEMPTS):
        with db.session() as session:
            rows = chain_rows(session, volume_id, target)
            session.expunge_all()
        try:
            plan = _measure(rows, measure, change)
        except NotFound as exc:
            log.info("chain of volume %s on %s changed while measured (%s); again",
                     volume_id, target, exc)
            continue
        with db.session() as session:
            lock_row(session, Volume.id, volume_id)
            now = chain_rows(session, volume_id, target)
            if _signature(now, change) != plan.signature:
                continue  # another job changed the chain since it was read: measure again
            growth = _write(session, now, plan, change)
            if change.apply is not None:
                change.apply(session, growth)
            return
    raise ChainChanging(f"the restore points of volume {volume_id} on target {target!r} kept "
                        "changing while their storage figures were measured; try again")


def _signature(rows: list[RestorePoint], change: Change) -> tuple[tuple[object, ...], ...]:
    """What a plan depends on: which restore points there are, their status, and what each
    is counted beyond."""
    return tuple((r.id, str(r.status), r.completed_at is not None, r.quota_basis_id,
                  r.added_bytes is None) for r in rows
                 if r.id != change.adding)


def _measure(rows: list[RestorePoint], measure: Measure, change: Change) -> _Plan:
    adding = next((r for r in rows if r.id == change.adding
                   and r.status == RestorePointStatus.CREATING), None)
    candidates = [r for r in rows if r is adding
                  or (holds_data(r) and r.id != change.removing)]
    present = measure.present([Point.of(r) for r in candidates if r is not adding])
    held = [r for r in candidates if r is adding or r.id in present]
    terms: dict[str, tuple[str | None, int]] = {}
    for index, rp in enumerate(held):
        previous = held[index - 1] if index else None
        basis = previous.id if previous is not None else None
        if rp is adding or rp.quota_basis_id != basis or rp.added_bytes is None:
            terms[rp.id] = (basis, measure.beyond(
                Point.of(previous) if previous is not None else None, Point.of(rp)))
    return _Plan(_signature(rows, change), [r.id for r in held], terms)


def _figures(rows: list[RestorePoint], plan: _Plan,
             change: Change) -> dict[str, tuple[str | None, int, int | None]]:
    """Restore point id -> (basis, figure, added) after the plan, for every row it changes:
    the measured ones, and the chain's other committed ones that hold no data (0)."""
    held = set(plan.held)
    out: dict[str, tuple[str | None, int, int | None]] = {}
    for rp in rows:
        if rp.id in plan.terms:
            basis, term = plan.terms[rp.id]
            # The one committed now added what it holds; one committed before `added_bytes`
            # was kept is measured now.
            added = term if rp.id == change.adding or rp.added_bytes is None else rp.added_bytes
            out[rp.id] = (basis, term, added)
        elif rp.id not in held and rp.status != RestorePointStatus.CREATING and rp.quota_bytes:
            out[rp.id] = (rp.quota_basis_id, 0, rp.added_bytes)
    return out


def _growth(rows: list[RestorePoint], figures: dict[str, tuple[str | None, int, int | None]]
            ) -> int:
    return sum(term - int(rp.quota_bytes or 0) for rp in rows if rp.id in figures
               for _, term, _ in [figures[rp.id]])


def _write(session: Session, rows: list[RestorePoint], plan: _Plan, change: Change) -> int:
    """Write the plan's figures; returns how much the project's total grew."""
    figures = _figures(rows, plan, change)
    growth = _growth(rows, figures)
    for rp in rows:
        if rp.id in figures:
            rp.quota_basis_id, rp.quota_bytes, rp.added_bytes = figures[rp.id]
    session.flush()
    return growth


def hand_on(db: Database, volume_id: str, target: str, removing: str,
            apply: Callable[[Session, int], None]) -> None:
    """`removing` leaves its chain without the chain being measured (its target cannot be
    read: an object target whose data key is missing or changed). What it counted is still
    on the target, since only a garbage collection frees chunks and none runs without the
    key: the next restore point of the chain that holds data takes its figure and basis, so
    the project's total neither shrinks below what the target holds nor grows."""
    with db.session() as session:
        lock_row(session, Volume.id, volume_id)
        rows = chain_rows(session, volume_id, target)
        gone = next((r for r in rows if r.id == removing), None)
        if gone is not None and gone.quota_bytes:
            later = rows[rows.index(gone) + 1:]
            heir = next((r for r in later if holds_data(r)), None)
            if heir is not None:
                heir.quota_bytes = int(heir.quota_bytes or 0) + gone.quota_bytes
                heir.quota_basis_id = gone.quota_basis_id
            gone.quota_bytes = 0
            session.flush()
        apply(session, 0)


def needed_to_commit(db: Database, measure: Measure, volume_id: str, target: str,
                     rp_id: str) -> int:
    """What the `creating` restore point must have reserved for its commit (`settle` with
    `Change(adding=rp_id)`) to grow its project's total by nothing: its own figure, plus
    what a later restore point of the chain then counts more (a copy of an older instant
    lands between two). Measured as the chain is now; the commit measures again if it
    changed."""
    with db.session() as session:
        rows = chain_rows(session, volume_id, target)
        session.expunge_all()
    change = Change(adding=rp_id)
    plan = _measure(rows, measure, change)
    figures = _figures(rows, plan, change)
    others = _growth([r for r in rows if r.id != rp_id], figures)
    return figures[rp_id][1] + others if rp_id in figures else 0
