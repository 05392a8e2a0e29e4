"""An object-store target (`CAIRN_OBJECT_TARGETS`): an S3 bucket under a prefix holding
content-addressed, compressed and sealed chunks, deduplicated per project, and one sealed
manifest per restore point (`manifests/<project>/<rp>`, names in
`services/storage/object_layout.py`; ADR 0007). Chunks are shared: a delete removes the
manifest, and a garbage collection frees the chunks no manifest names."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import ClassVar

from services.db import Database
from services.settings import ObjectTargetSettings, Settings
from services.storage import data_keys
from services.storage.ceph import CephClusters
from services.storage.object_layout import DATA_KEY, MANIFESTS, manifest_key, manifest_owner
from services.storage.s3 import Bucket
from services.targets.base import not_configured
from services.targets.scans import Finding, OrphanScan, gone

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ObjectStoreTarget:
    kind: ClassVar[str] = "s3"
    noun: ClassVar[str] = "object target"
    unit: ClassVar[str] = "chunk"
    receives_copies: ClassVar[bool] = True
    sends_copies: ClassVar[bool] = False
    collects_garbage: ClassVar[bool] = True

    name: str
    config: ObjectTargetSettings
    max_jobs: int
    _probed: list[Bucket] = field(default_factory=list, compare=False, repr=False)
    """The bucket the probes reuse (an S3 client holds a connection pool), dropped when a
    probe fails: its credentials may have been replaced."""
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @property
    def location(self) -> str:
        return f"object target {self.name}"

    @property
    def instant_restore_cluster(self) -> str | None:
        return None

    def bucket(self) -> Bucket:
        """A new client of its bucket (the caller closes it)."""
        return Bucket(self.config)

    def probe(self, clusters: CephClusters, db: Database) -> bool:
        """The bucket answers, with the target's own credentials, and holds the data key
        Cairn's database records for it: a target that lost its key, holds another, or is
        not where its key was stored refuses every job, so it is down until the operator
        puts the key back or points the target back."""
        try:
            with self._lock:
                if not self._probed:
                    self._probed.append(self.bucket())
                bucket = self._probed[0]
            bucket.check()
            wrong = data_keys.problem(db, bucket, self.name)
            if wrong is not None:
                log.warning("object target %s %s: nothing on it is read or written until "
                            "the key is put back (%s)", self.name, wrong, data_keys.GUIDE)
            return wrong is None
        except Exception as exc:
            log.warning("object target %s (%s, bucket %s) did not answer: %s", self.name,
                        self.config.endpoint, self.config.bucket, exc)
            with self._lock:
                self._probed.clear()
            return False

    def scan_orphans(self, scan: OrphanScan, sharing: set[str]) -> None:
        """Manifests whose restore point is gone (a backup whose undo could not reach the
        store, a delete that removed the row's data but crashed before the manifest) keep
        their chunks from garbage collection for ever: removed after the grace. Chunks are
        the collector's (`object_gc`): it frees what no manifest names. A bucket and prefix
        without the key Cairn stored there are not where the target's data is (pointed
        elsewhere, or the key removed): its restore points are not flagged for manifests
        missing there."""
        target, where = self.name, self.location
        listed_from = datetime.now(UTC)
        bucket = self.bucket()
        try:
            wrong = data_keys.problem(scan.db, bucket, target)
            if wrong is not None:
                scan.note(Finding(
                    "report", "data key", f"{where}/{DATA_KEY}",
                    f"the target {wrong}: nothing on it is read or written until the key is "
                    f"put back ({data_keys.GUIDE})"))
            elsewhere = wrong is not None and bucket.size(DATA_KEY) is None
            manifests: dict[str, tuple[tuple[str, str], datetime]] = {}
            for stored in bucket.list(MANIFESTS):
                owner = manifest_owner(stored.key)
                if owner is not None:
                    manifests[stored.key] = (owner, stored.modified)
            rows = scan.rows(rp_id for (_, rp_id), _ in manifests.values())
            for key, ((project_id, rp_id), modified) in sorted(manifests.items()):
                if modified >= scan.cutoff:
                    continue
                row = rows.get(rp_id)
                if row is None:
                    # The prefix is this target's, but a name without a row proves nothing
                    # about who wrote it (a database restored from an older dump?): only a
                    # row can say its data may go.
                    scan.note(Finding("report", "manifest", f"{where}/{key}",
                                      "no restore point row; left alone", rp_id))
                    continue
                why = gone(row)
                if why is None and (row.target != target or row.project_id != project_id):
                    why = f"restore point {rp_id} belongs to another target or project"
                if why is not None:
                    scan.act(Finding("remove", "manifest", f"{where}/{key}", why, rp_id),
                             partial(bucket.delete, key))
            for rp in scan.available({target}, listed_from):
                if elsewhere or manifest_key(rp.project_id, rp.id) in manifests:
                    continue
                reason = (f"its manifest {manifest_key(rp.project_id, rp.id)} is gone from "
                          f"{where}: this restore point can no longer be restored")
                scan.act(Finding("flag", "restore point", where, reason, rp.id),
                         partial(scan.flag, rp.id, reason))
        finally:
            bucket.close()


def configured(settings: Settings) -> list[ObjectStoreTarget]:
    """Every object-store target the settings name."""
    return [ObjectStoreTarget(name, config, config.max_jobs or settings.max_jobs_per_target)
            for name, config in settings.object_targets.items()]


def named(settings: Settings, name: str) -> ObjectStoreTarget:
    """The object-store target of this name, for what only an object store does (its data
    path); refused like any target the service does not configure (any more)."""
    config = settings.object_targets.get(name)
    if config is None:
        raise not_configured(name)
    return ObjectStoreTarget(name, config, config.max_jobs or settings.max_jobs_per_target)
