"""Gauges that describe the fleet, read from the database when Prometheus scrapes. The
database is the one truth every replica shares, so whichever cairn-api replica is scraped
gives the same values, and a restarted process loses nothing.

The recovery-point signal is two gauges joined on (project, plan): each protected volume's
newest successful restore point, and its plan's expected interval. The alert
CairnRestorePointStale (deploy/prometheus/alerts.yml) fires when the first is older than
1.5 times the second."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services import targets
from services.clock import Clock
from services.db import Database
from services.plans import schedule, timing
from services.quotas import service as quotas
from services.records.jobs import Job
from services.records.plans import Plan, PlanVolume
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.settings import Settings
from services.status import (
    JobKind,
    JobStatus,
    PlanStatus,
    RestorePointStatus,
    VerifyStatus,
)

log = logging.getLogger(__name__)

LOOKAHEAD_SLOTS = 10
"""The expected interval is the longest gap among a plan's next slots: a plan that runs on
weekdays only expects a restore point every three days at worst, not every day."""


def expected_interval(slots: list[datetime]) -> timedelta | None:
    """The longest gap between consecutive slots; None with fewer than two (the plan's rules
    end: nothing is expected any more)."""
    gaps = [later - earlier for earlier, later in pairwise(slots)]
    return max(gaps) if gaps else None


@dataclass(eq=False)  # registries key collectors by identity
class FleetCollector(Collector):
    db: Database
    settings: Settings
    clock: Clock
    _intervals: dict[tuple[str, datetime], float | None] = field(default_factory=dict,
                                                                 init=False)
    """Expected intervals by (plan, updated_at): schedules change only when plans do."""

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # nothing to check at registration; families come from collect()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        started = time.monotonic()
        up = GaugeMetricFamily("cairn_fleet_up", "Whether the last read of the fleet from the "
                               "database succeeded (1) or not (0).")
        try:
            with self.db.session() as session:
                families = list(self._families(session))
        except Exception:
            # A scrape must not fail with the database: the other families still tell.
            log.warning("reading the fleet's metrics failed", exc_info=True)
            families = []
        up.add_metric([], 1.0 if families else 0.0)
        yield up
        yield from families
        took = GaugeMetricFamily("cairn_fleet_read_seconds",
                                 "How long the last read of the fleet's gauges took.")
        took.add_metric([], time.monotonic() - started)
        yield took

    def _families(self, session: Session) -> Iterator[GaugeMetricFamily]:
        yield from self._recovery_points(session)
        yield from self._jobs(session)
        yield from self._slots(session)
        yield from self._restore_points(session)

    def _recovery_points(self, session: Session) -> Iterator[GaugeMetricFamily]:
        newest = dict(session.execute(
            select(RestorePoint.volume_id,
                   func.max(func.coalesce(RestorePoint.completed_at, RestorePoint.created_at)))
            .where(RestorePoint.status == RestorePointStatus.AVAILABLE)
            .group_by(RestorePoint.volume_id)).all())
        last = GaugeMetricFamily(
            "cairn_volume_last_success_timestamp_seconds",
            "When each volume of an enabled plan got its newest available restore point "
            "(Unix time); when the plan or the volume is newer than any, that time instead.",
            labels=["project", "plan", "volume"])
        interval = GaugeMetricFamily(
            "cairn_plan_expected_interval_seconds",
            "The longest gap between an enabled plan's next slots: how often it promises a "
            "restore point.", labels=["project", "plan"])
        now = self.clock()
        rows = session.execute(
            select(Plan, Volume).join(PlanVolume, PlanVolume.plan_id == Plan.id)
            .join(Volume, Volume.id == PlanVolume.volume_id)
            .where(Plan.status == PlanStatus.ENABLED)).all()
        plans: dict[str, Plan] = {}
        for plan, volume in rows:
            plans[plan.id] = plan
            since = newest.get(volume.id) or max(plan.created_at, volume.created_at)
            last.add_metric([plan.project_id, plan.id, volume.public_name], since.timestamp())
        # Forget the intervals of plans changed or gone since.
        self._intervals = {key: value for key, value in self._intervals.items()
                           if key[0] in plans and key[1] == plans[key[0]].updated_at}
        for plan in plans.values():
            seconds = self._interval(plan, now)
            if seconds is not None:
                interval.add_metric([plan.project_id, plan.id], seconds)
        yield last
        yield interval

    def _interval(self, plan: Plan, now: datetime) -> float | None:
        key = (plan.id, plan.updated_at)
        if key not in self._intervals:
            try:
                found = schedule.slots(timing.rules_of(plan), now, count=LOOKAHEAD_SLOTS)
            except Exception:  # a rule saved by an older version that no longer compiles
                log.warning("plan %s: cannot compute its interval", plan.id, exc_info=True)
                found = []
            gap = expected_interval([slot.at for slot in found])
            self._intervals[key] = gap.total_seconds() if gap is not None else None
        return self._intervals[key]

    def _jobs(self, session: Session) -> Iterator[GaugeMetricFamily]:
        counts = {(kind, status): n for kind, status, n in session.execute(
            select(Job.kind, Job.status, func.count())
            .where(Job.status.in_([JobStatus.QUEUED, JobStatus.RUNNING]))
            .group_by(Job.kind, Job.status))}
        jobs = GaugeMetricFamily("cairn_jobs", "Jobs queued and running, by kind.",
                                 labels=["kind", "status"])
        for kind in JobKind:
            for status in (JobStatus.QUEUED, JobStatus.RUNNING):
                jobs.add_metric([kind.value, status.value], counts.get((kind, status), 0))
        yield jobs

    def _slots(self, session: Session) -> Iterator[GaugeMetricFamily]:
        used = GaugeMetricFamily(
            "cairn_target_slots_in_use", "Concurrency slots (leases) held on each backup "
            "target, by project: one per running job.", labels=["target", "project"])
        for target, project, n in session.execute(
                select(Job.target, Job.project_id, func.count())
                .where(Job.status == JobStatus.RUNNING, Job.target.is_not(None))
                .group_by(Job.target, Job.project_id)):
            used.add_metric([target or "", project], n)
        limit = GaugeMetricFamily("cairn_target_slots", "Concurrency slots of each backup "
                                  "target (jobs over it wait, queued).", labels=["target"])
        # Every kind of target, with the limit the leases enforce (services/limits/leases.py).
        for configured in targets.every(self.settings):
            limit.add_metric([configured.name], configured.max_jobs)
        yield used
        yield limit

    def _restore_points(self, session: Session) -> Iterator[GaugeMetricFamily]:
        points = GaugeMetricFamily("cairn_restore_points", "Restore points, by project and "
                                   "status (deleted ones not counted).",
                                   labels=["project", "status"])
        stored = GaugeMetricFamily("cairn_stored_bytes", "Bytes a project's restore points "
                                   "hold in backup targets (what its quota counts).",
                                   labels=["project"])
        per_project: dict[str, int] = {}
        for project, status, n, size in session.execute(
                select(RestorePoint.project_id, RestorePoint.status, func.count(),
                       func.coalesce(func.sum(quotas.counted()), 0))
                .where(RestorePoint.status != RestorePointStatus.DELETED)
                .group_by(RestorePoint.project_id, RestorePoint.status)):
            points.add_metric([project, str(status)], n)
            per_project[project] = per_project.get(project, 0) + int(size or 0)
        for project, size in per_project.items():
            stored.add_metric([project], size)
        corrupt = GaugeMetricFamily(
            "cairn_restore_points_corrupt", "Restore points whose last verify found "
            "corruption, by project.", labels=["project"])
        for project, n in session.execute(
                select(RestorePoint.project_id, func.count())
                .where(RestorePoint.verify_status == VerifyStatus.CORRUPT,
                       RestorePoint.status != RestorePointStatus.DELETED)
                .group_by(RestorePoint.project_id)):
            corrupt.add_metric([project], n)
        yield points
        yield stored
        yield corrupt
