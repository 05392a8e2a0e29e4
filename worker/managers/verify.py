"""Verification of a restore point: re-read its backup snapshot with the copy engine (no
target) and compare every object with the manifest. The result, when it was verified and
which objects are corrupt, is recorded on the restore point; a corrupt one also fails the
job, so monitoring that watches failed jobs sees it."""

from __future__ import annotations

import json
import logging
import math
import random
from typing import Any

from sqlalchemy import select, update

from services.base import utcnow
from services.errors import DataCorrupt, NotFound
from services.metrics import events
from services.records.restore_points import RestorePoint
from services.settings import is_object_target, rbd_target
from services.status import VerifyStatus
from services.storage import rbd_images
from worker.engine import manifest
from worker.engine.copy import CopyEngine, CopyStats
from worker.engine.extents import Chunk, allocated_objects, plan_chunks
from worker.managers import object_restore
from worker.managers.claim import ClaimedJob
from worker.managers.drive import JobSteps, Outcome, drive
from worker.managers.lifecycle import run_job
from worker.managers.reporter import JobReporter
from worker.runtime import Runtime

log = logging.getLogger(__name__)

LISTED_CORRUPT_OBJECTS = 100
"""Corrupt object indexes kept on the restore point (the count is always exact)."""


def run_verify(rt: Runtime, job_id: str) -> None:
    run_job(rt, job_id, "verify",
            lambda job, reporter: drive(job, reporter, VerifySteps(rt, job, reporter)))


class VerifySteps(JobSteps):
    """Reads only: nothing to undo. Finding corruption is the verify's result, recorded on
    the restore point, and fails the job so monitoring that watches failed jobs sees it."""

    noun = "verify"

    def __init__(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
        with rt.db.session() as session:
            rp = session.get(RestorePoint, job.restore_point_id)
            assert rp is not None
            session.expunge_all()
        self.rt, self.job, self.reporter, self.rp = rt, job, reporter, rp

    def work(self) -> Outcome:
        rt, rp = self.rt, self.rp
        fraction = self.job.verify_fraction
        try:
            if is_object_target(rt.settings, rp.target):
                stats, corrupt = object_restore.verify(rt, self.reporter, rp, fraction)
            else:
                stats, corrupt = _verify(rt, self.reporter, rp, fraction)
        except DataCorrupt as exc:  # the manifest or the snapshot itself is gone or damaged
            _record(rt, rp, [], exc.message, fraction)
            raise
        _record(rt, rp, corrupt, None, fraction)
        if not corrupt:
            return Outcome(stats=stats)
        offsets = ", ".join(str(i) for i in corrupt[:10])
        unit = "chunk" if is_object_target(rt.settings, rp.target) else "object"
        return Outcome(stats=stats, error_code="data_corrupt",
                       error_message=f"{len(corrupt)} {unit}(s) of restore point {rp.id} are "
                       f"missing or do not match their checksums ({unit} indexes {offsets}"
                       f"{', ...' if len(corrupt) > 10 else ''}); the restore point is "
                       "marked corrupt. Restore from another restore point.")


def _verify(rt: Runtime, reporter: JobReporter, rp: RestorePoint,
            fraction: float | None) -> tuple[CopyStats, list[int]]:
    target = rbd_target(rt.settings, rp.target)
    with rt.clusters.ioctx(target.cluster, target.pool) as backup_io:
        recorded = manifest.load(backup_io, rp.manifest_object)
        try:
            with rbd_images.open_image(backup_io, rp.backup_image, snapshot=rp.snapshot,
                                       read_only=True) as source:
                size = source.size()
                object_size = 1 << source.stat()["order"]
                recorded.check_shape(size, object_size)
                # Objects with data, and objects the manifest expects data in (a lost
                # object reads as zeros and must be reported, not skipped).
                chunks = plan_chunks(size, object_size,
                                     allocated_objects(source, size, object_size),
                                     recorded.digests)
                if fraction is not None:
                    chunks = sample(chunks, fraction)
                corrupt: list[int] = []
                engine = CopyEngine(window=rt.settings.copy_window, pacer=reporter.pacer,
                                    on_progress=reporter.progress)
                reporter.start_copy(sum(c.length for c in chunks if c.in_source), 0,
                                    engine.window)
                stats = engine.run(source, None, chunks, verify=recorded, corrupt=corrupt)
        except NotFound:
            raise DataCorrupt(f"the backup snapshot of restore point {rp.id} is missing from "
                              f"the backup pool {target.pool!r}") from None
    return stats, sorted(corrupt)


def sample(chunks: list[Chunk], fraction: float) -> list[Chunk]:
    """A random `fraction` of the chunks (at least one), in object order: a new draw each
    time, so successive sampled verifies cover different objects."""
    if not chunks:
        return chunks
    count = max(1, math.ceil(len(chunks) * fraction))
    if count >= len(chunks):
        return chunks
    return sorted(random.sample(chunks, count), key=lambda c: c.index)


def _record(rt: Runtime, rp: RestorePoint, corrupt: list[int], reason: str | None,
            fraction: float | None) -> None:
    now = utcnow()
    values: dict[str, Any] = {
        "verified_at": now,
        "verify_mode": "full" if fraction is None else "sampled",
        "verify_status": VerifyStatus.CORRUPT if corrupt or reason else VerifyStatus.OK,
        "corrupt_object_count": len(corrupt),
        "corrupt_objects": json.dumps(corrupt[:LISTED_CORRUPT_OBJECTS]),
    }
    if fraction is None:
        values["verified_full_at"] = now
    with rt.db.session() as session:
        before = session.scalar(select(RestorePoint.verify_status)
                                .where(RestorePoint.id == rp.id))
        if fraction is not None and values["verify_status"] == VerifyStatus.OK \
                and before == VerifyStatus.CORRUPT:
            # A clean sample says nothing about the objects it did not read: an earlier
            # finding of corruption stands until a full verify clears it.
            for key in ("verify_status", "corrupt_object_count", "corrupt_objects"):
                values.pop(key)
        session.execute(update(RestorePoint).where(RestorePoint.id == rp.id).values(**values))
    found = VerifyStatus.CORRUPT if corrupt or reason else VerifyStatus.OK
    events.verify_results.labels(rp.project_id, found.value).inc()
