"""The worker's half of an object-store target (`services/targets/object_store.py`), and
of every kind that keeps the same chunk format (a directory target: `targets.ChunkTarget`,
whose backend the managers open whatever it is): a backup sends the source snapshot's
chunks and stores a sealed manifest (`worker/managers/object_backup.py`); a restore and a
verify fetch and check the chunks the manifest names (`object_restore.py`), and so does a
reader, a chunk at a time (`worker/engine/chunk_reader.py`); a delete removes the
manifest, and the chunks go with the next garbage collection (`object_gc.py`, ADR 0007)."""

from __future__ import annotations

from services import targets
from services.quotas import chains
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.storage.refs import ImageRef
from worker.engine.block_reader import DEFAULT_CACHE_BYTES
from worker.engine.chunk_reader import ChunkReader
from worker.engine.copy import CopyStats
from worker.managers import object_restore
from worker.managers.claim import ClaimedJob
from worker.managers.drive import Aftercare, JobSteps
from worker.managers.measure_object import ObjectHeld
from worker.managers.object_backup import ObjectBackupSteps
from worker.managers.object_stores import manifest_of, open_store, remove_manifest
from worker.managers.reporter import JobReporter
from worker.runtime import Runtime
from worker.targets.reader import RestorePointReader


class ObjectStorePath:
    def backup(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> JobSteps:
        return ObjectBackupSteps(rt, job, reporter)

    def restore(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
                dest: ImageRef, *, create: bool) -> CopyStats:
        return object_restore.restore(rt, job, reporter, rp, dest, create=create)

    def verify(self, rt: Runtime, reporter: JobReporter, rp: RestorePoint,
               fraction: float | None) -> tuple[CopyStats, list[int]]:
        return object_restore.verify(rt, reporter, rp, fraction)

    def reader(self, rt: Runtime, rp: RestorePoint, *,
               cache_bytes: int = DEFAULT_CACHE_BYTES) -> RestorePointReader:
        # As a restore: the store opened with the target's key, the manifest checked to
        # be sealed with it; as many chunks fetched at once as a backup sends (a restore
        # fetches its own `downloads_in_flight`).
        store = open_store(rt.settings, rt.db, rp.target)
        return ChunkReader(store, rp.project_id, manifest_of(store, rp),
                           cache_bytes=cache_bytes,
                           window=targets.chunked(rt.settings, rp.target).config.uploads_in_flight)

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
