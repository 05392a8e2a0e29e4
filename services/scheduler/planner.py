"""Turning plans into jobs: every due slot of every enabled plan becomes one job per volume.

Exactly once, with any number of scheduler replicas: a job's (plan, volume, slot) is unique in
the database, so a second insert for the same slot is dropped; replicas on PostgreSQL also
split the due plans between them (FOR UPDATE SKIP LOCKED), and each plan's cursor
(`next_slot_at`) only moves forward by a guarded update.

Misfires (the scheduler was down): a slot missed by more than the grace period is recorded
as a `skipped` job (code `misfire`); of the slots still within the grace period only the
newest runs (the others are `skipped` as `superseded`: one late backup holds the newest
data, and it is a full if any of them was a full). A slot never runs in a burst.

A slot whose volume still has a backup queued or running is recorded `skipped`
(`volume_busy`): the job that is waiting takes its snapshot when it starts, so it already
holds the newest data. Over quota, the slot's jobs are recorded `failed` with the reason."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from services.db import Database
from services.errors import InvalidSchedule
from services.jobs import factory
from services.jobs import repository as jobs_repository
from services.jobs.inserts import insert_ignoring_conflicts
from services.plans import schedule, timing
from services.plans.prunes import request_prune
from services.quotas import service as quotas
from services.records.groups import RestorePointGroup
from services.records.jobs import Job
from services.records.plans import Plan
from services.records.volumes import Volume
from services.restore_points import factory as rp_factory
from services.settings import Settings
from services.status import Consistency, JobStatus, PlanStatus, RestorePointKind
from services.webhooks import events as webhook_events
from services.webhooks import openstack

log = logging.getLogger(__name__)

PLANS_PER_TRANSACTION = 100
SLOTS_PER_ROUND = 1000
"""Slots one plan materializes per round: a plan missed for a year catches up over a few
rounds instead of one huge transaction."""


@dataclass
class PlanResult:
    queued: int = 0
    skipped: int = 0
    failed: int = 0
    plans: int = 0


def schedule_due(db: Database, settings: Settings, now: datetime) -> PlanResult:
    total = PlanResult()
    grace = timedelta(seconds=settings.misfire_grace_seconds)
    # Each pass moves the plans it sees past `now` (or, catching up, by SLOTS_PER_ROUND
    # slots), so the loop ends; the bound only guards against a plan that cannot move.
    for _ in range(1000):
        with db.session() as session:
            stmt = (select(Plan).where(Plan.status == PlanStatus.ENABLED,
                                       Plan.next_slot_at <= now)
                    .order_by(Plan.next_slot_at).limit(PLANS_PER_TRANSACTION))
            if session.get_bind().dialect.name == "postgresql":
                stmt = stmt.with_for_update(skip_locked=True, of=Plan)
            plans = list(session.scalars(stmt))
            batch = _Batch(now, grace, settings.job_max_attempts,
                           notify_openstack=openstack.enabled(settings))
            for plan in plans:
                batch.add(plan)
            batch.write(session, total)
        if len(plans) < PLANS_PER_TRANSACTION:
            break
    return total


@dataclass
class _Run:
    """A plan's slot that runs now, for one of its volumes (unless busy or over quota)."""

    common: dict[str, Any]
    volume_id: str
    slot: schedule.Slot
    kind: RestorePointKind
    not_before: datetime
    group_id: str | None = None
    """The run's restore point group (a group plan): the same for every volume of it."""


@dataclass
class _Batch:
    """The jobs of up to PLANS_PER_TRANSACTION plans, written with a handful of statements
    (10 000 slots due in one minute must not cost 50 000 round trips)."""

    now: datetime
    grace: timedelta
    max_attempts: int
    notify_openstack: bool = False
    rows: list[dict[str, Any]] = field(default_factory=list)
    runs: list[_Run] = field(default_factory=list)
    cursors: list[dict[str, Any]] = field(default_factory=list)

    def add(self, plan: Plan) -> None:
        cursor = plan.next_slot_at
        assert cursor is not None
        try:
            rules = timing.rules_of(plan)
            due = schedule.slots(rules, cursor - timedelta(microseconds=1), until=self.now,
                                 count=SLOTS_PER_ROUND)
            if due and len(due) == SLOTS_PER_ROUND:
                next_slot: datetime | None = due[-1].at + timedelta(microseconds=1)
            else:
                following = schedule.slots(rules, self.now, count=1)  # due are all <= now
                next_slot = following[0].at if following else None
        except InvalidSchedule as exc:
            # Saved before today's checks (or too costly now): the plan stops being
            # scheduled instead of stopping every other plan's round; saving valid rules
            # schedules it again.
            log.error("plan %s: its rules cannot be evaluated, it has no next slot: %s",
                      plan.id, exc.message)
            self.cursors.append({"plan": plan.id, "old": cursor, "new": None})
            return
        self.cursors.append({"plan": plan.id, "old": cursor, "new": next_slot})
        missed = [s for s in due if self.now - s.at > self.grace]
        late = [s for s in due if self.now - s.at <= self.grace]
        common = {"project_id": plan.project_id, "plan_id": plan.id, "target": plan.target,
                  "qos": factory.Qos(plan.qos_bytes_per_second, plan.qos_ops_per_second),
                  "max_attempts": self.max_attempts}
        volume_ids = [v.id for v in plan.volumes]
        for volume_id in volume_ids:
            for slot in missed:
                self.rows.append(_ended(
                    common, volume_id, slot, self.now, JobStatus.SKIPPED, "misfire",
                    f"missed: the scheduler was not running at {slot.at:%Y-%m-%d %H:%M} UTC "
                    f"and the slot is older than the grace period "
                    f"({self.grace.total_seconds():.0f} s)"))
            for slot in late[:-1]:
                self.rows.append(_ended(
                    common, volume_id, slot, self.now, JobStatus.SKIPPED, "superseded",
                    "missed while the scheduler was down; the newest missed slot within the "
                    "grace period runs instead"))
        if not late:
            return
        run = late[-1]
        kind = (RestorePointKind.FULL if any(s.kind == RestorePointKind.FULL for s in late)
                else run.kind)
        window = timing.window_of(plan)
        not_before = window.next_open(run.at) if window else run.at
        group_id = (run_group_id(plan.id, run.at)
                    if plan.consistency == Consistency.GROUP else None)
        self.runs += [_Run(common, v, run, kind, not_before, group_id) for v in volume_ids]

    def write(self, session: Session, total: PlanResult) -> None:
        queued = self._decide(session)
        insert_ignoring_conflicts(session, self.rows)
        self._tell_refusals(session)
        if queued:
            self._record_lost_races(session, queued)
        if self.cursors:
            # Guarded by the old cursor: a replica that got here first already moved it.
            session.connection().execute(
                update(Plan).where(Plan.id == bindparam("plan"),
                                   Plan.next_slot_at == bindparam("old"))
                .values(next_slot_at=bindparam("new")), self.cursors)
        total.plans += len(self.cursors)
        total.queued += len(queued)
        total.skipped += sum(1 for r in self.rows if r["status"] == JobStatus.SKIPPED)
        total.failed += sum(1 for r in self.rows if r["status"] == JobStatus.FAILED)

    def _decide(self, session: Session) -> list[_Run]:
        """Each run becomes a queued job, or skipped (volume busy), or failed (quota)."""
        if not self.runs:
            return []
        busy = jobs_repository.volumes_with_active_backup(
            session, sorted({r.volume_id for r in self.runs}))
        wanted: dict[str, int] = {}
        for r in self.runs:
            project = r.common["project_id"]
            wanted[project] = wanted.get(project, 0) + 1
        # In one order (each check locks the project's quota row): two replicas planning
        # runs of the same projects never wait on each other in a circle.
        over = {p: quotas.shortfall(session, p, wanted[p]) for p in sorted(wanted)}
        queued = []
        for r in self.runs:
            reason = over[r.common["project_id"]]
            if reason is not None:
                self.rows.append(_ended(r.common, r.volume_id, r.slot, self.now,
                                        JobStatus.FAILED, "quota_exceeded", reason))
            elif r.volume_id in busy:
                self.rows.append(_busy(r.common, r.volume_id, r.slot, self.now))
            else:
                self.rows.append(factory.backup(
                    **r.common, volume_id=r.volume_id, slot_at=r.slot.at, kind=r.kind,
                    not_before=r.not_before, now=self.now, group_id=r.group_id))
                queued.append(r)
        groups = {r.group_id: rp_factory.group(
            project_id=r.common["project_id"], plan_id=r.common["plan_id"], now=self.now,
            slot_at=r.slot.at, group_id=r.group_id) for r in queued if r.group_id is not None}
        # Deterministic ids: a replica racing for the same slot makes the same group.
        insert_ignoring_conflicts(session, list(groups.values()), RestorePointGroup)
        return queued

    def _tell_refusals(self, session: Session) -> None:
        """A run the quota refused ends like a job that failed: its `backup.create.error`
        event, in this transaction (only for rows this round inserted: a replica that
        planned the same slot first told it)."""
        refused = {r["id"]: r for r in self.rows if r.get("error_code") == "quota_exceeded"}
        if not refused:
            return
        mine = set(session.scalars(select(Job.id).where(Job.id.in_(list(refused)))))
        names = {v.id: v.public_name for v in session.scalars(
            select(Volume).where(Volume.id.in_({refused[j]["volume_id"] for j in mine})))}
        for job_id in sorted(mine):
            row = refused[job_id]
            webhook_events.record(
                session, row["project_id"], "backup.create.error",
                subject=names.get(row["volume_id"]), now=self.now,
                notify_openstack=self.notify_openstack,
                data={"tenant_id": row["project_id"], "user_id": None,
                      "volume_id": names.get(row["volume_id"]), "backup_id": None,
                      "size": None, "status": JobStatus.FAILED.value,
                      "fail_reason": row["error_message"], "parent_id": None,
                      "job_id": job_id, "job_kind": "backup", "error_code": "quota_exceeded",
                      "plan_id": row["plan_id"], "target": row["target"],
                      "kind": str(row["backup_kind"]), "bytes": None,
                      "duration_seconds": 0.0, "bottleneck": None})

    def _record_lost_races(self, session: Session, queued: list[_Run]) -> None:
        """A queued row dropped by the one-backup-per-volume index (an on-demand backup
        started between our check and our insert) leaves its slot without a job: record
        it skipped."""
        have = {(plan_id, volume_id) for plan_id, volume_id in session.execute(
            select(Job.plan_id, Job.volume_id).where(
                Job.plan_id.in_({r.common["plan_id"] for r in queued}),
                Job.slot_at.in_({r.slot.at for r in queued})))}
        lost = [r for r in queued if (r.common["plan_id"], r.volume_id) not in have]
        insert_ignoring_conflicts(session, [_busy(r.common, r.volume_id, r.slot, self.now)
                                            for r in lost])


def run_group_id(plan_id: str, slot_at: datetime) -> str:
    """The restore point group of a group plan's scheduled run, the same in every scheduler
    replica that plans it."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"cairn:plan:{plan_id}:{slot_at.isoformat()}"))


def _busy(common: dict[str, Any], volume_id: str, slot: schedule.Slot,
          now: datetime) -> dict[str, Any]:
    return _ended(common, volume_id, slot, now, JobStatus.SKIPPED, "volume_busy",
                  "the volume's previous backup was still queued or running; it takes its "
                  "snapshot when it starts, so it holds the newest data")


def _ended(common: dict[str, Any], volume_id: str, slot: schedule.Slot, now: datetime,
           status: JobStatus, code: str, message: str) -> dict[str, Any]:
    return factory.ended(factory.backup(**common, volume_id=volume_id, slot_at=slot.at,
                                        kind=slot.kind, now=now), status, code, message)


def request_prunes(db: Database, settings: Settings, now: datetime) -> int:
    """A prune job for every enabled plan not pruned for `prune_interval_seconds`."""
    cutoff = now - timedelta(seconds=settings.prune_interval_seconds)
    with db.session() as session:
        plans = list(session.execute(
            select(Plan.id, Plan.project_id).where(
                Plan.status == PlanStatus.ENABLED,
                (Plan.last_pruned_at.is_(None)) | (Plan.last_pruned_at < cutoff))
        ).all())
        for plan_id, project_id in plans:
            request_prune(session, plan_id, project_id, now,
                          max_attempts=settings.job_max_attempts)
    return len(plans)
