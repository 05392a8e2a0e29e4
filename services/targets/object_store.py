"""An object-store target (`CAIRN_OBJECT_TARGETS`): an S3 bucket under a prefix holding
content-addressed, compressed and sealed chunks, deduplicated per project, and one sealed
manifest per restore point (`manifests/<project>/<rp>`, names in
`services/storage/object_layout.py`; ADR 0007). Chunks are shared: a delete removes the
manifest, and a garbage collection frees the chunks no manifest names."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import ClassVar

from services.db import Database
from services.settings import ObjectTargetSettings, Settings
from services.storage.ceph import CephClusters
from services.storage.s3 import Bucket
from services.targets.base import Configured
from services.targets.chunked import ChunkKind, holds_its_key, scan_manifests
from services.targets.scans import OrphanScan

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ObjectStoreTarget(ChunkKind, Configured[ObjectTargetSettings]):
    kind: ClassVar[str] = "s3"
    noun: ClassVar[str] = "object target"

    _probed: list[Bucket] = field(default_factory=list, compare=False, repr=False)
    """The bucket the probes reuse (an S3 client holds a connection pool), dropped when a
    probe fails: its credentials may have been replaced."""
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @property
    def location(self) -> str:
        return f"object target {self.name}"

    def backend(self) -> Bucket:
        """A new client of its bucket (the caller closes it)."""
        return Bucket(self.config)

    def probe(self, clusters: CephClusters, db: Database) -> bool:
        """The bucket answers, with the target's own credentials, and holds the data key
        Cairn's database records for it (`chunked.holds_its_key`)."""
        try:
            with self._lock:
                if not self._probed:
                    self._probed.append(self.backend())
                bucket = self._probed[0]
            bucket.check()
            return holds_its_key(db, bucket, self)
        except Exception as exc:
            log.warning("object target %s (%s, bucket %s) did not answer: %s", self.name,
                        self.config.endpoint, self.config.bucket, exc)
            with self._lock:
                self._probed.clear()
            return False

    def scan_orphans(self, scan: OrphanScan, sharing: set[str]) -> None:
        """Its manifests, as every chunk-format target's (`chunked.scan_manifests`)."""
        bucket = self.backend()
        try:
            scan_manifests(scan, self.name, self.location, bucket,
                           deadline=scan.target_deadline())
        finally:
            bucket.close()


def configured(settings: Settings) -> list[ObjectStoreTarget]:
    """Every object-store target the settings name."""
    return [ObjectStoreTarget(name, config, config.max_jobs or settings.max_jobs_per_target)
            for name, config in settings.object_targets.items()]

