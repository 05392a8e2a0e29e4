"""Restore and verify of a restore point kept on an object-storage target: every chunk is
fetched, authenticated and checked against its name before a byte of it is written (a
corrupt or missing chunk fails the restore with its offset); holes and all-zero chunks
are left sparse on a new image and zeroed on an existing one. The target's
`downloads_in_flight` chunks are fetched at once, opened on the worker's cores and written
`copy_window` at once (`worker/engine/object_download.py`). A retry after a crash resumes
at the chunk where the last attempt stopped, skipping those it finished past it
(`destination.py`)."""

from __future__ import annotations

import math
import random
from contextlib import ExitStack

from services import targets
from services.records.restore_points import RestorePoint
from services.storage.refs import ImageRef
from worker.engine import object_download
from worker.engine.copy import CopyStats
from worker.managers.claim import ClaimedJob
from worker.managers.destination import prepare_destination
from worker.managers.object_stores import manifest_of, open_store
from worker.managers.progress import ReporterProgress
from worker.managers.reporter import JobReporter
from worker.runtime import Runtime

ORDER = 22
"""4 MiB RBD objects for a new image: every chunk size divides them."""


def restore(rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
            dest: ImageRef, *, create: bool) -> CopyStats:
    """Write the restore point into `dest`: a new image when `create`, else the existing
    one (`prepare_destination`: a retry resumes at its checkpoint, in chunks)."""
    settings = targets.chunked(rt.settings, rp.target).config
    store = open_store(rt.settings, rt.db, rp.target)
    manifest = manifest_of(store, rp)
    size = manifest.image_size
    reporter.phases.restart()
    with ExitStack() as stack:
        dest_io = stack.enter_context(rt.clusters.ioctx(dest.cluster, dest.pool))
        destination = prepare_destination(stack, dest_io, dest, job, rp.id, size, order=ORDER,
                                          create=create)
        reporter.phases.lap("open")
        reporter.on_persist = destination.checkpoint
        stats = object_download.download(
            store, rp.project_id, manifest, destination.image, target_is_new=destination.fresh,
            start=destination.start, done=destination.done,
            fetches=settings.downloads_in_flight, writes=rt.settings.copy_window,
            pacer=reporter.pacer, progress=ReporterProgress(reporter))
        destination.finish()
    reporter.phases.lap("copy")
    return stats


def verify(rt: Runtime, reporter: JobReporter, rp: RestorePoint,
           fraction: float | None) -> tuple[CopyStats, list[int]]:
    """Re-read the restore point's chunks (all, or a random `fraction`), checking each one's
    tag and name; the indexes of the chunks found corrupt or missing. A manifest that is
    missing or fails its own tag raises DataCorrupt; one sealed with another key than the
    target's now, TargetKeyChanged (`manifest_of`): the restore point is not corrupt."""
    settings = targets.chunked(rt.settings, rp.target).config
    store = open_store(rt.settings, rt.db, rp.target)
    manifest = manifest_of(store, rp)
    only = None
    if fraction is not None:
        indexes = sorted(manifest.chunks)
        count = max(1, math.ceil(len(indexes) * fraction)) if indexes else 0
        only = random.sample(indexes, min(count, len(indexes)))
    stats, found = object_download.verify(store, rp.project_id, manifest,
                                          fetches=settings.downloads_in_flight,
                                          pacer=reporter.pacer,
                                          progress=ReporterProgress(reporter), only=only)
    return stats, [offset // manifest.chunk_size for offset, _reason in found]
