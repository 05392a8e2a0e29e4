"""Whether each backup target answers (`cairn_target_up`): an RBD target's pool, an object
target's bucket (with the target's own credentials) holding its data key beside its data
(one that lost its key refuses every backup: it is down until the operator puts the key
back). Asked from a thread of
its own: a cluster that does not answer holds a probe for the connect or op timeout (10 to
30 s), and the scheduler's round (admission, the schedule, the reconciler) must not wait for it.
On a stack whose second cluster was down, a probe inside the round delayed every job's start
by ten seconds."""

from __future__ import annotations

import logging
import threading

from services.scheduler import metrics
from services.settings import Settings
from services.storage import data_keys
from services.storage.ceph import CephClusters
from services.storage.s3 import Bucket

log = logging.getLogger(__name__)


class TargetProber:
    def __init__(self, settings: Settings, clusters: CephClusters) -> None:
        self.settings = settings
        self.clusters = clusters
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
                held = data_keys.data_without_key(self._buckets[name])
                if held is not None:
                    log.warning("object target %s holds %s but no data key: nothing on it can "
                                "be read and backups to it are refused until the key is put "
                                "back", name, held)
                up = held is None
            except Exception as exc:
                log.warning("object target %s (%s, bucket %s) did not answer: %s", name,
                            store.endpoint, store.bucket, exc)
                self._buckets.pop(name, None)  # its credentials may have been replaced
                up = False
            metrics.target_up.labels(name).set(1 if up else 0)
