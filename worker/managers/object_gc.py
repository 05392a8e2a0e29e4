"""Garbage collection of one object target (ADR 0007): chunks that no manifest names any
more are deleted, never one a backup running at the same time may name.

1. Mark, without any lease: read every manifest (the expensive part; backups go on).
2. Take the target's exclusive lease: it waits for the backups holding shared ones to
   write their manifests, and keeps new ones from looking chunks up until the sweep ends.
3. Mark the manifests written or rewritten since step 1.
4. Sweep: delete the unmarked chunks written before the grace cutoff, checking the lease
   before each deletion.

The whole collection has `object_gc_max_seconds` from its start: no page of a listing is
asked for, no manifest read and no chunk deleted after that (StorageError; stopped before
or in its marks, nothing is swept). The exclusive lease is so given back at most one
request after that time: the page, manifest read or delete then under way, within its own
deadline (an object target's: `timeout_seconds` and its bytes at
`min_read_bytes_per_second`; a directory target's reads have none, docs/operations.md).
Waiting for the lease counts too: a collection that waited past its time marks nothing
more and sweeps nothing.

A target whose key is lost while it holds data is not collected (TargetKeyMissing: every
manifest would be unreadable), nor one whose bucket holds another key than Cairn's database
records, or whose available restore points were sealed with another key than the target's
(TargetKeyChanged), nor one whose manifests do not open with its key (DataCorrupt): the
collection stops before its sweep, says why, and counts the failure
(`cairn_object_gc_runs_total{outcome="failed"}`), every run until the cause is gone.

The restore points made before keys were fingerprinted get the key's fingerprint once the
mark read their manifests with it (their tags prove the key)."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from sqlalchemy import select

from services.base import utcnow
from services.errors import CairnError, TargetKeyChanged, TargetNeverWritten
from services.limits import target_leases
from services.metrics import events
from services.records.restore_points import RestorePoint
from services.storage import data_keys, key_records
from services.targets.chunked import listed_manifests
from worker.engine import chunk_gc
from worker.managers.object_stores import open_store
from worker.runtime import Runtime

log = logging.getLogger(__name__)

LEASE_WAIT_SECONDS = 1800.0


def collect(rt: Runtime, target: str, *, grace_seconds: float | None = None,
            wait_seconds: float = LEASE_WAIT_SECONDS) -> chunk_gc.SweepStats | None:
    """Collect `target`'s garbage; None when the target has never been written to. Every
    run is counted by outcome; a failed one raises."""
    try:
        stats = _collect(rt, target, grace_seconds, wait_seconds)
    except Exception as exc:
        events.gc_run(target, "failed", exc.code if isinstance(exc, CairnError) else "error")
        log.error("garbage collection of %s stopped before its sweep: %s", target,
                  exc.message if isinstance(exc, CairnError) else exc)
        raise
    events.gc_run(target, "skipped" if stats is None else "succeeded", "")
    return stats


def _collect(rt: Runtime, target: str, grace_seconds: float | None,
             wait_seconds: float) -> chunk_gc.SweepStats | None:
    try:
        store = open_store(rt.settings, rt.db, target)
    except TargetNeverWritten:
        return None
    others = key_records.other_fingerprints(rt.db, target, store.key.fingerprint)
    if others:
        raise TargetKeyChanged(
            f"available restore points on target {target!r} were sealed with data keys of "
            f"fingerprint {', '.join(others)}, and the target's key is now the one of "
            f"fingerprint {store.key.fingerprint}: their manifests cannot be read with it, so "
            "nothing is collected (a sweep would take their chunks). Put their key back "
            f"({data_keys.GUIDE})", target=target)
    grace = rt.settings.object_gc_grace_seconds if grace_seconds is None else grace_seconds
    # Whoever holds the storage decides what its listings hold and how long they go on: the
    # manifests kept here are bounded by Cairn's records, and the whole collection (the
    # exclusive lease's part included) by its time.
    deadline = time.monotonic() + rt.settings.object_gc_max_seconds
    stats = chunk_gc.SweepStats()

    def stranger() -> None:
        stats.strangers += 1

    first = list(listed_manifests(rt.db, store.backend, target, deadline=deadline,
                                  stranger=stranger))
    marked = chunk_gc.mark(store, image_sizes(rt, target), stats, deadline=deadline,
                           manifests=first)
    with target_leases.held(rt.db, target, f"gc:{rt.name}", exclusive=True,
                            ttl_seconds=rt.settings.lease_seconds,
                            wait_seconds=wait_seconds) as lease:
        seen = set(first)
        chunk_gc.mark(store, image_sizes(rt, target), stats, deadline=deadline, into=marked,
                      manifests=[m for m in listed_manifests(rt.db, store.backend, target,
                                                             deadline=deadline)
                                 if m not in seen])
        cutoff = utcnow() - timedelta(seconds=grace)
        chunk_gc.sweep(store, marked, cutoff, stats=stats, before_delete=lease.ensure,
                       deadline=deadline)
    key_records.stamp_restore_points(rt.db, target, stats.restore_points_read,
                                     store.key.fingerprint)
    log.info("garbage collection of %s: %d manifests, %d chunks, %d deleted (%d bytes), "
             "%d too new, %d not Cairn's", target, stats.manifests, stats.chunks,
             stats.chunks_deleted, stats.bytes_deleted, stats.chunks_too_new, stats.strangers)
    return stats


def image_sizes(rt: Runtime, target: str) -> dict[str, int]:
    """Restore point id -> its image's size, for every restore point on `target` whose row
    gives one (a backup records it before it stores the manifest): what bounds the reads
    of their manifests."""
    with rt.db.session() as session:
        return {rp_id: size for rp_id, size in session.execute(
            select(RestorePoint.id, RestorePoint.size_bytes).where(
                RestorePoint.target == target, RestorePoint.size_bytes.is_not(None)))
            if size is not None}
