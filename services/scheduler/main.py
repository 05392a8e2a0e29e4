"""`cairn-scheduler`: the loop that keeps jobs moving. Each tick it turns due plan slots into
jobs, requests periodic prunes, hands lost and stuck jobs back (every
`reconcile_interval_seconds`) and admits queued jobs whose concurrency slots are free.
Several replicas may run at once: every step is safe against a racing twin."""

from __future__ import annotations

import faulthandler
import logging
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from services import targets
from services.base import utcnow
from services.clock import clock_for
from services.db import Database
from services.dispatch import Dispatcher, make_celery
from services.idempotency import service as idempotency
from services.limits.leases import Leases
from services.metrics import exposition
from services.openstack.cinder_gateway import gateway_for
from services.plans import cinder_groups
from services.restore_points.orphans import OrphanReconciler
from services.scheduler import metrics
from services.scheduler.admission import Admission
from services.scheduler.planner import request_prunes, schedule_due
from services.scheduler.probes import TargetProber
from services.scheduler.reconciler import reconcile
from services.scheduler.verifies import request_verifies
from services.settings import Settings, settings_for
from services.storage.ceph import CephClusters
from services.webhooks import outbox as webhook_outbox

log = logging.getLogger("cairn.scheduler")


class Scheduler:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.clock = clock_for(settings.clock_file)
        self.db = Database(settings.database_url)
        self.leases = Leases.from_settings(settings)
        self.dispatcher = Dispatcher(make_celery(settings.redis_url))
        self.admission = Admission(self.db, self.leases, self.dispatcher, settings)
        self._last_reconcile = 0.0
        self._last_verify = 0.0
        self._last_keys = 0.0
        self._last_orphans = time.monotonic()  # not at start: replicas restart together
        self._last_collect = time.monotonic()
        self._last_groups = 0.0
        self._groups_said: cinder_groups.LeftOut = {}
        self.cinder = gateway_for(settings.keystone, settings.cinder)
        self.clusters = CephClusters(settings)
        self.orphans = OrphanReconciler(self.db, self.clusters, settings)
        self.prober = TargetProber(settings, self.clusters, self.db)

    def tick(self) -> None:
        """One round; each step on its own so a failing one (Redis away) does not stop the
        others (slots are still turned into jobs while the broker is down)."""
        started = time.perf_counter()
        now = self.clock()
        steps: list[tuple[str, Callable[[datetime], None]]] = [
            ("schedule", self._schedule), ("reconcile", self._reconcile),
            ("verify", self._verify), ("orphans", self._orphans), ("admit", self._admit),
            ("idempotency keys", self._forget_keys), ("object gc", self._collect),
            ("cinder groups", self._follow_groups)]
        for name, step in steps:
            try:
                step(now)
            except Exception:
                metrics.step_failures.labels(name).inc()
                log.warning("%s step failed; retrying next tick", name, exc_info=True)
        metrics.tick_seconds.observe(time.perf_counter() - started)
        metrics.last_tick.set(time.time())

    def _schedule(self, now: datetime) -> None:
        result = schedule_due(self.db, self.settings, now)
        if result.plans:
            log.info("slots due in %d plans: %d jobs queued, %d skipped, %d failed",
                     result.plans, result.queued, result.skipped, result.failed)
        request_prunes(self.db, self.settings, now)

    def _reconcile(self, now: datetime) -> None:
        if time.monotonic() - self._last_reconcile < self.settings.reconcile_interval_seconds:
            return
        self._last_reconcile = time.monotonic()
        # Heartbeats and send times are real-clock bookkeeping, whatever the schedule clock.
        result = reconcile(
            self.db, now=utcnow(),
            heartbeat_timeout=timedelta(seconds=self.settings.job_heartbeat_timeout_seconds),
            redispatch_after=timedelta(seconds=self.settings.job_redispatch_after_seconds))
        if result.requeued or result.redispatched:
            log.info("requeued %s, re-sending %s", result.requeued, result.redispatched)

    def _orphans(self, _now: datetime) -> None:
        if time.monotonic() - self._last_orphans < self.settings.orphan_interval_seconds:
            return
        self._last_orphans = time.monotonic()
        report = self.orphans.run(
            apply=not self.settings.orphan_dry_run,
            grace=timedelta(seconds=self.settings.orphan_grace_seconds))
        for finding in report.findings:
            if finding.action == "report" or not report.applied:
                log.info("orphan reconciler (%s): %s %s: %s", "would " + finding.action
                         if not report.applied and finding.action != "report" else "left",
                         finding.what, finding.location, finding.reason)
        for error in report.errors:
            log.warning("orphan reconciler: %s", error)

    def _verify(self, now: datetime) -> None:
        if time.monotonic() - self._last_verify < self.settings.verify_interval_seconds:
            return
        self._last_verify = time.monotonic()
        queued = request_verifies(self.db, self.settings, now)
        if queued:
            log.info("queued %d scheduled verifies", queued)

    def _admit(self, now: datetime) -> None:
        self.admission.admit(now)

    def _forget_keys(self, _now: datetime) -> None:
        if time.monotonic() - self._last_keys < self.settings.prune_interval_seconds:
            return
        self._last_keys = time.monotonic()
        with self.db.session() as session:  # real time: keys are kept 24 h of real time
            forgotten = idempotency.purge(session, utcnow())
        if forgotten:
            log.info("forgot %d idempotency keys older than 24 h", forgotten)
        days = self.settings.event_delivery_log_days
        purged = webhook_outbox.purge(self.db, utcnow() - timedelta(days=days))
        if purged:
            log.info("forgot %d event deliveries older than %g days", purged, days)

    def _collect(self, _now: datetime) -> None:
        if time.monotonic() - self._last_collect < self.settings.object_gc_interval_seconds:
            return
        self._last_collect = time.monotonic()
        for target in targets.every(self.settings):
            if target.collects_garbage:
                self.dispatcher.send_collect(target.name)

    def _follow_groups(self, now: datetime) -> None:
        if self.cinder is None \
                or time.monotonic() - self._last_groups < self.settings.cinder_group_sync_seconds:
            return
        self._last_groups = time.monotonic()
        result = cinder_groups.sync_all(self.db, self.settings, self.cinder, now,
                                         self._groups_said)
        if result.changed:
            log.info("plans following Cinder groups: %d of %d changed volumes",
                     len(result.changed), result.plans)
        for error in result.errors:
            log.warning("Cinder group sync: %s", error)

    def close(self) -> None:
        self.prober.stop()
        self.leases.close()
        self.db.dispose()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = settings_for("cairn-scheduler")
    scheduler = Scheduler(settings)
    scheduler.prober.start()
    exposition.serve("cairn-scheduler", settings.metrics_host, settings.scheduler_metrics_port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    # As cairn-worker: `kill -USR2` writes every thread's stack to the log.
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    faulthandler.enable(all_threads=True)  # an abort in librados: every stack in the log
    log.info("cairn-scheduler started (tick %.1f s, reconcile every %.1f s)",
             settings.scheduler_tick_seconds, settings.reconcile_interval_seconds)
    while not stop.is_set():
        scheduler.tick()
        stop.wait(settings.scheduler_tick_seconds)
    scheduler.close()
    log.info("cairn-scheduler stopped")
