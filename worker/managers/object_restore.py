"""Restore and verify of a restore point kept on an object-storage target: every chunk is
fetched, authenticated and checked against its name before a byte of it is written (a
corrupt or missing chunk fails the restore with its offset); holes and all-zero chunks
are left sparse on a new image and zeroed on an existing one."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from contextlib import ExitStack

import rbd

from services import targets
from services.records.restore_points import RestorePoint
from services.restore_points.marks import JOB_KEY, RESTORE_POINT_KEY, resume_point
from services.storage import rbd_images
from services.storage.refs import ImageRef
from worker.engine import object_copy
from worker.engine.copy import CopyStats
from worker.managers.claim import ClaimedJob
from worker.managers.object_stores import manifest_of, open_store
from worker.managers.progress import ReporterProgress
from worker.managers.reporter import JobReporter
from worker.runtime import Runtime

ORDER = 22
"""4 MiB RBD objects for a new image: every chunk size divides them."""


def restore(rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
            dest: ImageRef, *, create: bool,
            claim: Callable[[rbd.Image, int], object]) -> CopyStats:
    """Write the restore point into `dest`: a new image when `create` (a retry finds the
    image its earlier attempt made and writes it whole again), else the existing image
    `claim(image, size)` accepts."""
    settings = targets.chunked(rt.settings, rp.target).config
    store = open_store(rt.settings, rt.db, rp.target)
    manifest = manifest_of(store, rp)
    size = manifest.image_size
    reporter.phases.restart()
    with ExitStack() as stack:
        dest_io = stack.enter_context(rt.clusters.ioctx(dest.cluster, dest.pool))
        fresh = False
        if create and (job.attempt == 1
                       or resume_point(dest_io, dest.image, job.id) is None):
            rbd_images.create_image(dest_io, dest.image, size, order=ORDER,
                                    metadata={JOB_KEY: job.id, RESTORE_POINT_KEY: rp.id},
                                    replace_remnant=job.attempt > 1)
            fresh = True
        restored = stack.enter_context(rbd_images.open_image(dest_io, dest.image))
        if not create:
            claim(restored, size)
        reporter.phases.lap("open")
        stats = object_copy.download(store, rp.project_id, manifest, restored,
                                     target_is_new=fresh, window=settings.uploads_in_flight,
                                     pacer=reporter.pacer, progress=ReporterProgress(reporter))
        restored.flush()
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
    stats, found = object_copy.verify(store, rp.project_id, manifest,
                                      window=settings.uploads_in_flight, pacer=reporter.pacer,
                                      progress=ReporterProgress(reporter), only=only)
    return stats, [offset // manifest.chunk_size for offset, _reason in found]
