"""Garbage collection of an object-storage target: chunks no manifest names any more.

Mark: read every manifest under the target and collect the names each project's manifests
use. Sweep: delete every chunk of the target that is not marked and was last written before
`cutoff`. A chunk newer than the cutoff may belong to a backup that has not written its
manifest yet, so it stays for a later run.

What this module does not decide is when a sweep may run beside backups: a backup may
decide to reuse a chunk the mark found unreferenced (its lookup found it in the store), and
the sweep would then delete a chunk the backup's manifest is about to name. The caller
keeps sweeps and backups of one target apart with leases (ADR 0007,
`worker/managers/object_gc.py`).

Both are bounded by a deadline (monotonic, the caller's `object_gc_max_seconds`): the mark
reads no manifest after it, and the sweep deletes no chunk after it (nor asks for a page of
chunks); either then raises StorageError. A mark so stopped leaves nothing to sweep; a sweep
so stopped has deleted only unmarked chunks. Past the deadline, at most the one request
then under way goes on (a page, a manifest's read, a delete), within its own deadline."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from services.errors import StorageError
from services.storage.chunk_backend import StoredObject
from services.storage.object_layout import CHUNKS, MANIFESTS, chunk_key, manifest_owner
from worker.engine.chunk_store import UNSIZED_IMAGE_BYTES, ChunkStore

log = logging.getLogger(__name__)


@dataclass
class SweepStats:
    manifests: int = 0
    chunks: int = 0
    chunks_referenced: int = 0
    chunks_too_new: int = 0
    chunks_deleted: int = 0
    bytes_deleted: int = 0
    strangers: int = 0
    """Objects under chunks/ or manifests/ whose names are not the names Cairn gives its
    chunks and manifests: left alone, reported."""
    restore_points_read: set[str] = field(default_factory=set)
    """The restore points whose manifests the mark read (each opened with the store's key)."""


def _in_time(deadline: float, doing: str) -> None:
    if time.monotonic() > deadline:
        log.warning("garbage collection ran out of its time (CAIRN_OBJECT_GC_MAX_SECONDS) "
                    "before %s: stopped", doing)
        raise StorageError(
            f"the garbage collection ran out of its time (CAIRN_OBJECT_GC_MAX_SECONDS) before "
            f"{doing}: stopped there (a mark so stopped sweeps nothing; a sweep so stopped "
            "has deleted only chunks no manifest names)")


def mark(store: ChunkStore, image_sizes: Mapping[str, int], stats: SweepStats | None = None,
         *, deadline: float, manifests: Iterable[StoredObject] | None = None,
         into: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Project -> names of the chunks its manifests name, over every manifest stored (or
    those of `manifests`, added to `into`). `image_sizes`: restore point id -> the size of
    its image as Cairn's records give it, which bounds what is read of its manifest; one
    no row sizes is read up to UNSIZED_IMAGE_BYTES or the largest image given, whichever
    is larger (its chunks must still be marked, or the sweep would take them). A manifest
    longer than its bound, or one that does not open, stops the collection (DataCorrupt
    naming it) before anything is swept.

    An object under manifests/ whose name is not one Cairn gives a manifest
    (`manifest_owner`: a project, then a restore point's id) is not Cairn's: no backup
    wrote it, so no chunk it could name is one a restore point needs. It is left alone
    and reported, as a stranger among the chunks is; it does not stop the collection,
    which whoever can write the target could otherwise stop for good.

    `deadline` (monotonic): no manifest is read after it (StorageError), nor is the
    listing of manifests (when it is this one's) asked for a page."""
    stats = stats if stats is not None else SweepStats()
    marked: dict[str, set[str]] = into if into is not None else {}
    largest = max([UNSIZED_IMAGE_BYTES, *image_sizes.values()])
    listed = manifests if manifests is not None \
        else store.backend.list(MANIFESTS, deadline=deadline)
    for stored in listed:
        owner = manifest_owner(stored.key)
        if owner is None:
            stats.strangers += 1
            log.warning("object %r under the target's manifests is not a Cairn manifest; "
                        "left alone", stored.key)
            continue
        project_id, restore_point_id = owner
        _in_time(deadline, f"reading the manifest {stored.key}")
        manifest = store.read_manifest(project_id, restore_point_id,
                                       image_sizes.get(restore_point_id, largest))
        marked.setdefault(project_id, set()).update(manifest.names())
        stats.manifests += 1
        stats.restore_points_read.add(restore_point_id)
    return marked


def _is_chunk_name(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def sweep(store: ChunkStore, marked: dict[str, set[str]], cutoff: datetime, *,
          stats: SweepStats | None = None,
          before_delete: Callable[[], None] | None = None,
          deadline: float) -> SweepStats:
    """Deletes the unmarked chunks last written before `cutoff` (timezone-aware).
    `before_delete` is called before each deletion (a caller holding a lease checks it
    there, and raises to stop). `deadline` (monotonic): no chunk is deleted, nor page of
    the chunks' listing asked for, after it (StorageError), the sweep stopped where it
    was."""
    stats = stats if stats is not None else SweepStats()
    for stored in store.backend.list(CHUNKS, deadline=deadline):
        parts = stored.key.split("/")
        if len(parts) != 4 or not _is_chunk_name(parts[3]) or not parts[1].isprintable() \
                or chunk_key(parts[1], parts[3]) != stored.key:
            stats.strangers += 1
            log.warning("object %r under the target's chunks is not a Cairn chunk; left alone",
                        stored.key)
            continue
        _, project_id, _, name = parts
        stats.chunks += 1
        if name in marked.get(project_id, ()):
            stats.chunks_referenced += 1
        elif stored.modified >= cutoff:
            stats.chunks_too_new += 1
        else:
            if before_delete is not None:
                before_delete()
            _in_time(deadline, f"deleting {stored.key}")
            store.backend.delete(stored.key)
            stats.chunks_deleted += 1
            stats.bytes_deleted += stored.size
    return stats


def collect(store: ChunkStore, image_sizes: Mapping[str, int], cutoff: datetime, *,
            deadline: float) -> SweepStats:
    """Mark, then sweep, both by `deadline`."""
    stats = SweepStats()
    return sweep(store, mark(store, image_sizes, stats, deadline=deadline), cutoff,
                 stats=stats, deadline=deadline)
