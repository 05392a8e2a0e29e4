"""Verification of a restore point: re-read its backup snapshot with the copy engine (no
target) and compare every object with the manifest. The result, when it was verified and
which objects are corrupt, is recorded on the restore point; a corrupt one also fails the
job, so monitoring that watches failed jobs sees it."""

from __future__ import annotations

import json
import logging

from sqlalchemy import update

from services.base import utcnow
from services.errors import CairnError, DataCorrupt, JobLost, NotFound
from services.restore_points.models import RestorePoint
from services.status import JobStatus, VerifyStatus
from services.storage import rbd_images
from worker.engine import manifest
from worker.engine.copy import CopyEngine, CopyStats
from worker.engine.extents import allocated_objects, plan_chunks
from worker.managers.lifecycle import (
    ClaimedJob,
    JobReporter,
    end_status,
    failure_reason,
    run_job,
)
from worker.runtime import Runtime

log = logging.getLogger(__name__)

LISTED_CORRUPT_OBJECTS = 100
"""Corrupt object indexes kept on the restore point (the count is always exact)."""


def run_verify(rt: Runtime, job_id: str) -> None:
    run_job(rt, job_id, "verify", lambda job, reporter: _run(rt, job, reporter))


def _run(rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
    with rt.db.session() as session:
        rp = session.get(RestorePoint, job.restore_point_id)
        assert rp is not None
        session.expunge_all()
    try:
        reporter.check()
        stats, corrupt = _verify(rt, reporter, rp)
    except JobLost:
        raise
    except DataCorrupt as exc:  # the manifest itself is gone or damaged
        _record(rt, rp, [], exc.message)
        reporter.finish(JobStatus.FAILED, error_code=exc.code,
                        error_message=f"verify: {exc.message}")
        return
    except BaseException as exc:
        code, message = failure_reason(exc)
        reporter.finish(end_status(exc), error_code=code, error_message=f"verify: {message}")
        if not isinstance(exc, CairnError):
            raise
        return
    _record(rt, rp, corrupt, None)
    if corrupt:
        offsets = ", ".join(str(i) for i in corrupt[:10])
        reporter.finish(JobStatus.FAILED, stats=stats, error_code="data_corrupt",
                        error_message=f"{len(corrupt)} object(s) of restore point {rp.id} do "
                        f"not match their checksums (object indexes {offsets}"
                        f"{', ...' if len(corrupt) > 10 else ''}); the restore point is "
                        "marked corrupt. Restore from another restore point.")
        return
    reporter.finish(JobStatus.SUCCEEDED, stats=stats)


def _verify(rt: Runtime, reporter: JobReporter, rp: RestorePoint) -> tuple[CopyStats, list[int]]:
    target = rt.settings.backup_targets[rp.target]
    with rt.clusters.ioctx(target.cluster, target.pool) as backup_io:
        recorded = manifest.load(backup_io, rp.manifest_object)
        try:
            with rbd_images.open_image(backup_io, rp.backup_image, snapshot=rp.snapshot,
                                       read_only=True) as source:
                size = source.size()
                object_size = 1 << source.stat()["order"]
                if (recorded.image_size, recorded.object_size) != (size, object_size):
                    raise DataCorrupt(
                        f"the manifest describes a {recorded.image_size}-byte image but the "
                        f"backup snapshot holds {size} bytes")
                # Objects with data, and objects the manifest expects data in (a lost
                # object reads as zeros and must be reported, not skipped).
                chunks = plan_chunks(size, object_size,
                                     allocated_objects(source, size, object_size),
                                     recorded.digests)
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


def _record(rt: Runtime, rp: RestorePoint, corrupt: list[int], reason: str | None) -> None:
    with rt.db.session() as session:
        session.execute(
            update(RestorePoint).where(RestorePoint.id == rp.id).values(
                verified_at=utcnow(),
                verify_status=VerifyStatus.CORRUPT if corrupt or reason else VerifyStatus.OK,
                corrupt_object_count=len(corrupt),
                corrupt_objects=json.dumps(corrupt[:LISTED_CORRUPT_OBJECTS]),
            )
        )
