"""Whether each backup target answers (`cairn_target_up`), as the target says
(`Target.probe`: an RBD target's pool, an object target's bucket holding its data key).
Asked from a thread of its own: a cluster that does not answer holds a probe for the
connect or op timeout (10 to 30 s), and the scheduler's round (admission, the schedule,
the reconciler) must not wait for it.
On a stack whose second cluster was down, a probe inside the round delayed every job's start
by ten seconds."""

from __future__ import annotations

import threading

from services import targets
from services.db import Database
from services.scheduler import metrics
from services.settings import Settings
from services.storage.ceph import CephClusters


class TargetProber:
    def __init__(self, settings: Settings, clusters: CephClusters, db: Database) -> None:
        self.settings = settings
        self.clusters = clusters
        self.db = db
        self.targets = targets.every(settings)
        """Made once: a target keeps what its probes reuse (an object store's client)."""
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
        for target in self.targets:
            if self._stop.is_set():
                return
            up = target.probe(self.clusters, self.db)
            metrics.target_up.labels(target.name).set(1 if up else 0)
