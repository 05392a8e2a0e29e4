"""Whether each backup target answers (`cairn_target_up`): an RBD target's pool, an object
target's bucket (with the target's own credentials) holding the data key Cairn's database
records for it (one that lost its key, holds another, or is not where its key was stored
refuses every job: it is down until the operator puts the key back or points the target
back). Asked from a thread of its own: a cluster that does not answer holds a probe for the
connect or op timeout (10 to 30 s), and the scheduler's round (admission, the schedule,
the reconciler) must not wait for it.
On a stack whose second cluster was down, a probe inside the round delayed every job's start
by ten seconds."""

from __future__ import annotations

import logging
import threading

from services.db import Database
from services.scheduler import metrics
from services.settings import Settings
from services.storage import data_keys
from services.storage.ceph import CephClusters
from services.storage.s3 import Bucket

log = logging.getLogger(__name__)


class TargetProber:
    def __init__(self, settings: Settings, clusters: CephClusters, db: Database) -> None:
        self.settings = settings
        self.clusters = clusters
        self.db = db
        self._buckets: dict[str, Bucket] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="target-probes", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():  # never started when the scheduler failed to start
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.probe_once()
            self._stop.wait(self.settings.target_probe_interval_seconds)

    def probe_once(self) -> None:
        """Each target in turn; a failing one is logged and does not stop the others."""
        for name, target in self.settings.backup_targets.items():
            if self._stop.is_set():
                return
            try:
                up = self.clusters.pool_exists(target.cluster, target.pool)
            except Exception as exc:
                log.warning("backup target %s (%s/%s) did not answer: %s", name,
                            target.cluster, target.pool, exc)
                up = False
            metrics.target_up.labels(name).set(1 if up else 0)
        for name, store in self.settings.object_targets.items():
            if self._stop.is_set():
                return
            try:
                if name not in self._buckets:
                    self._buckets[name] = Bucket(store)
                self._buckets[name].check()
                wrong = data_keys.problem(self.db, self._buckets[name], name)
                if wrong is not None:
                    log.warning("object target %s %s: nothing on it is read or written until "
                                "the key is put back (%s)", name, wrong, data_keys.GUIDE)
                up = wrong is None
            except Exception as exc:
                log.warning("object target %s (%s, bucket %s) did not answer: %s", name,
                            store.endpoint, store.bucket, exc)
                self._buckets.pop(name, None)  # its credentials may have been replaced
                up = False
            metrics.target_up.labels(name).set(1 if up else 0)
