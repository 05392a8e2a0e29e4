"""What every kind of target that keeps restore points in the chunk format (ADR 0007:
content-addressed, compressed and sealed chunks, deduplicated per project, one sealed
manifest per restore point, a data key made exactly once) shares, wherever it keeps them:
its settings (`ChunkFormatSettings`), a `ChunkBackend` for its blobs, the check of its data
key that its probe makes, and the orphan scan of its manifests.

A kind of this family is a `ChunkTarget`: the registry's `targets.chunked` finds one by
name for the chunk format's data path (the worker's `object_*` managers), which opens its
backend and never asks which kind it is. Its class extends `ChunkKind`, which declares once
what the format lets every such kind do; the kind's module says only its name and noun."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from typing import ClassVar, Protocol, runtime_checkable

from sqlalchemy import func, select

from services.db import Database
from services.errors import StorageError
from services.records.restore_points import RestorePoint
from services.settings import ChunkFormatSettings
from services.storage import data_keys
from services.storage.chunk_backend import ChunkBackend, StoredObject
from services.storage.object_layout import DATA_KEY, MANIFESTS, manifest_key, manifest_owner
from services.targets.base import Target
from services.targets.scans import Finding, OrphanScan, gone

log = logging.getLogger(__name__)


@runtime_checkable
class ChunkTarget(Target, Protocol):
    @property
    def config(self) -> ChunkFormatSettings:
        """Its chunk size, the chunks a job moves at once, its job limit."""

    def backend(self) -> ChunkBackend:
        """A new client of where its blobs live (the caller closes it)."""


class ChunkKind:
    """What every kind keeping the chunk format can do (`Target`'s capabilities), the same
    wherever its blobs live: a manifest's checksums cover chunks; it receives copies of an
    RBD target's restore points (off site) and sends none (the copy reads an RBD snapshot);
    chunks are shared, so a deleted restore point leaves them to a garbage collection; and
    it holds no RBD snapshot an instant restore could clone."""

    unit: ClassVar[str] = "chunk"
    receives_copies: ClassVar[bool] = True
    sends_copies: ClassVar[bool] = False
    collects_garbage: ClassVar[bool] = True

    @property
    def instant_restore_cluster(self) -> str | None:
        return None


def holds_its_key(db: Database, backend: ChunkBackend, target: ChunkTarget) -> bool:
    """Whether the target holds the data key Cairn's database records for it (for its
    probe): one that lost its key, holds another, or is not where its key was stored
    refuses every job, so it is down until the operator puts the key back or points the
    target back. Logs why not."""
    wrong = data_keys.problem(db, backend, target.name)
    if wrong is not None:
        log.warning("%s %s %s: nothing on it is read or written until the key is put back "
                    "(%s)", target.noun, target.name, wrong, data_keys.GUIDE)
    return wrong is None


MANIFESTS_MARGIN = 1000
"""Manifests a target may hold beyond one per restore point row, plus a tenth of those
rows (`listed_manifests`)."""

STRANGERS_LOGGED = 10
"""Names not Cairn's that a listing of manifests logs one by one; the rest are counted."""


def manifests_bound(db: Database, target: str) -> int:
    """The most objects a listing of `target`'s manifests may name: one per restore point
    Cairn's database has recorded on it, in any state (a manifest is only ever written for
    such a row, and rows are never deleted), a tenth more and MANIFESTS_MARGIN besides
    (strangers, a database restored from a somewhat older dump)."""
    with db.session() as session:
        rows = session.scalar(select(func.count()).select_from(RestorePoint).where(
            RestorePoint.target == target)) or 0
    return rows + rows // 10 + MANIFESTS_MARGIN


def listed_manifests(db: Database, backend: ChunkBackend, target: str, *, deadline: float,
                     stranger: Callable[[], None] = lambda: None) -> Iterator[StoredObject]:
    """The objects of `backend.list(MANIFESTS)` named as Cairn names a manifest
    (`manifest_owner`: a project, then a restore point's id), refused (StorageError, before
    the one past it is given) once they are more than `manifests_bound`: what a caller
    keeping the listing holds is bounded by Cairn's records, not by what the storage's
    holder lists. Any other name is not Cairn's (no backup wrote it, no chunk it could
    name is one a restore point needs): counted (`stranger` is called), logged escaped
    (the first STRANGERS_LOGGED), neither given nor kept, nor counted against the bound,
    so that planted names stop no collection. The listing is refused past `deadline`
    (monotonic), and asks for no more pages than the bound fills and a margin
    (`ChunkBackend.list`'s `most`): beyond about 100,000 strangers, it is refused too."""
    bound = manifests_bound(db, target)
    count = strangers = 0
    for stored in backend.list(MANIFESTS, deadline=deadline, most=bound):
        if manifest_owner(stored.key) is None:
            strangers += 1
            stranger()
            if strangers <= STRANGERS_LOGGED:
                log.warning("object %r under the manifests of target %s is not a Cairn "
                            "manifest; left alone", stored.key, target)
            continue
        count += 1
        if count > bound:
            log.warning("target %s lists more than %d manifests: refused", target, bound)
            raise StorageError(
                f"target {target!r} lists more manifests than the {bound} Cairn can have "
                "written there (one per restore point it records on the target, a tenth and "
                f"{MANIFESTS_MARGIN} more): objects under manifests/ were put there outside "
                "Cairn, or the database is older than the target; nothing is collected "
                "until that is seen to")
        yield stored
    if strangers > STRANGERS_LOGGED:
        log.warning("target %s holds %d objects under its manifests that are not Cairn "
                    "manifests (the first %d logged); left alone", target, strangers,
                    STRANGERS_LOGGED)


def scan_manifests(scan: OrphanScan, target: str, where: str, backend: ChunkBackend, *,
                   deadline: float) -> None:
    """Manifests whose restore point is gone (a backup whose undo could not reach the
    target, a delete that removed the row's data but crashed before the manifest) keep
    their chunks from garbage collection for ever: removed after the grace. Chunks are the
    collector's (`object_gc`): it frees what no manifest names. A target without the key
    Cairn stored there is not where its data is (pointed elsewhere, or the key removed): its
    restore points are not flagged for manifests missing there. `where`: how findings name
    the target's root. `deadline` (monotonic, the target's share of the scan,
    `OrphanScan.target_deadline`): the listing is refused past it, and no manifest is
    removed after it; the scan then fails (StorageError, the reconciler reports it) having
    flagged nothing."""
    listed_from = datetime.now(UTC)
    wrong = data_keys.problem(scan.db, backend, target)
    if wrong is not None:
        scan.note(Finding(
            "report", "data key", f"{where}/{DATA_KEY}",
            f"the target {wrong}: nothing on it is read or written until the key is put "
            f"back ({data_keys.GUIDE})"))
    elsewhere = wrong is not None and backend.size(DATA_KEY) is None
    manifests: dict[str, tuple[tuple[str, str], datetime]] = {}
    try:
        for stored in listed_manifests(scan.db, backend, target, deadline=deadline):
            owner = manifest_owner(stored.key)
            if owner is not None:
                manifests[stored.key] = (owner, stored.modified)
    except StorageError as exc:
        if time.monotonic() > deadline:
            raise scan.out_of_time(target) from exc
        raise
    rows = scan.rows(rp_id for (_, rp_id), _ in manifests.values())
    for key, ((project_id, rp_id), modified) in sorted(manifests.items()):
        if modified >= scan.cutoff:
            continue
        row = rows.get(rp_id)
        if row is None:
            # The root is this target's, but a name without a row proves nothing about who
            # wrote it (a database restored from an older dump?): only a row can say its
            # data may go.
            scan.note(Finding("report", "manifest", f"{where}/{key}",
                              "no restore point row; left alone", rp_id))
            continue
        why = gone(row)
        if why is None and (row.target != target or row.project_id != project_id):
            why = f"restore point {rp_id} belongs to another target or project"
        if why is not None:
            if time.monotonic() > deadline:
                raise scan.out_of_time(target)
            scan.act(Finding("remove", "manifest", f"{where}/{key}", why, rp_id),
                     partial(backend.delete, key))
    for rp in scan.available({target}, listed_from):
        if elsewhere or manifest_key(rp.project_id, rp.id) in manifests:
            continue
        reason = (f"its manifest {manifest_key(rp.project_id, rp.id)} is gone from "
                  f"{where}: this restore point can no longer be restored")
        scan.act(Finding("flag", "restore point", where, reason, rp.id),
                 partial(scan.flag, rp.id, reason))
