"""The worker's half of a target: its data path. `services/targets/` holds what every
process asks a target (kind, limit, probe, orphan scan); what only a worker does with it
(copy a backup there, restore, verify or read a restore point, remove one's data, measure
a chain) is built on the copy engine and the job lifecycle, which the domain may not
import. So each kind has a `DataPath` here, one module per kind, found by `Target.kind`
(`worker/targets/__init__.py`)."""

from __future__ import annotations

from typing import Protocol

from services.quotas import chains
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.storage.refs import ImageRef
from worker.engine.block_reader import DEFAULT_CACHE_BYTES
from worker.engine.copy import CopyStats
from worker.managers.claim import ClaimedJob
from worker.managers.drive import Aftercare, JobSteps
from worker.managers.reporter import JobReporter
from worker.runtime import Runtime
from worker.targets.reader import RestorePointReader


class DataPath(Protocol):
    def backup(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> JobSteps:
        """The steps of a backup to the target, driven to its commit point by `drive`."""

    def restore(self, rt: Runtime, job: ClaimedJob, reporter: JobReporter, rp: RestorePoint,
                dest: ImageRef, *, create: bool) -> CopyStats:
        """Write the restore point into `dest`, every object or chunk checked as it is
        read: a new image when `create`, else the existing one, prepared and resumed by
        `worker/managers/destination.py`'s one rule."""

    def verify(self, rt: Runtime, reporter: JobReporter, rp: RestorePoint,
               fraction: float | None) -> tuple[CopyStats, list[int]]:
        """Re-read the restore point (all, or a random `fraction`) against its manifest;
        the indexes (`Target.unit`) found corrupt or missing. DataCorrupt when the
        manifest or the restore point itself is gone or damaged."""

    def reader(self, rt: Runtime, rp: RestorePoint, *,
               cache_bytes: int = DEFAULT_CACHE_BYTES) -> RestorePointReader:
        """The restore point's bytes for reads at random, each block checked as it is read
        by the check `restore` and `verify` make (`worker/targets/reader.py`), keeping up
        to `cache_bytes` of checked blocks; the caller closes it. DataCorrupt when the
        manifest or the restore point's data is gone or damaged."""

    def delete(self, rt: Runtime, rp: RestorePoint) -> None:
        """Remove a `deleting` restore point's data from the target (not its source
        snapshot: that is the volume's, whatever the target)."""

    def after_delete(self, rt: Runtime, rp: RestorePoint, volume: Volume, job_id: str, *,
                     locked: bool) -> Aftercare:
        """Best-effort steps once restore points were deleted (`locked`: the caller holds
        the volume's lock)."""

    def measure(self, rt: Runtime, rp: RestorePoint) -> chains.Measure:
        """What `rp`'s chain holds on the target (the quota's figures)."""
