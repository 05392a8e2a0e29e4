"""The worker's half of an object-store target (`services/targets/object_store.py`), and
of every kind that keeps the same chunk format (a directory target: `targets.ChunkTarget`,
whose backend the managers open whatever it is): a backup sends the source snapshot's
chunks and stores a sealed manifest (`worker/managers/object_backup.py`); a restore and a
verify fetch and check the chunks the manifest names (`object_restore.py`); a delete
removes the manifest, and the chunks go with the next garbage collection (`object_gc.py`,
ADR 0007)."""

from __future__ import annotations

from services.quotas import chains
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.storage.refs import ImageRef
from worker.engine.copy import CopyStats
from worker.managers import object_restore
from worker.managers.claim import ClaimedJob
from worker.managers.drive import Aftercare, JobSteps
from worker.managers.measure_object import ObjectHeld
from worker.managers.object_backup import ObjectBackupSteps
from worker.managers.object_stores import open_store, remove_manifest
from worker.managers.reporter import JobReporter
from worker.runtime import Runtime


class ObjectStorePath:
    def backup(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> JobSteps:
        return ObjectBackupSteps(rt, job, reporter)

    def restore(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
                dest: ImageRef, *, create: bool) -> CopyStats:
        return object_restore.restore(rt, job, reporter, rp, dest, create=create)

    def verify(self, rt: Runtime, reporter: JobReporter, rp: RestorePoint,
               fraction: float | None) -> tuple[CopyStats, list[int]]:
        return object_restore.verify(rt, reporter, rp, fraction)

    def delete(self, rt: Runtime, rp: RestorePoint) -> None:
        # The manifest goes; its chunks stay until a garbage collection finds no other
        # manifest naming them (ADR 0007). No key is needed for that: a restore point is
        # deleted even from a target whose key is lost.
        remove_manifest(rt.settings, rp.target, rp.project_id, rp.id)

    def after_delete(self, rt: Runtime, rp: RestorePoint, volume: Volume, job_id: str, *,
                     locked: bool) -> Aftercare:
        return []  # no head: a restore point's data is its manifest

    def measure(self, rt: Runtime, rp: RestorePoint) -> chains.Measure:
        return ObjectHeld(open_store(rt.settings, rt.db, rp.target), rp.project_id)
