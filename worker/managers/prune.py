"""Prune of one plan: for each of its volumes, under the volume's lock (so no backup of the
volume runs meanwhile and no incremental loses its base), delete the restore points the
plan's retention no longer keeps. A volume whose backup holds the lock is left for the next
prune, which follows that backup. The rule itself is services/plans/retention.py."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy.orm import Session

from services import targets
from services.errors import CairnError
from services.plans import schedule, service
from services.plans.retention import evaluate
from services.plans.schemas import policy_of, retention_for
from services.records.plans import Plan
from services.records.restore_points import RestorePoint, unlocked
from services.status import (
    RESTORE_POINT_TRANSITIONS,
    JobStatus,
    RestorePointStatus,
    guarded_update,
)
from services.volumes import locks
from worker.managers.claim import ClaimedJob
from worker.managers.delete import delete_restore_point, settle_refused_delete
from worker.managers.drive import failure_reason
from worker.managers.lifecycle import run_job
from worker.managers.reporter import JobReporter
from worker.managers.signals import JobLost
from worker.runtime import Runtime
from worker.targets import data_path_of

log = logging.getLogger(__name__)


def run_prune(rt: Runtime, job_id: str) -> None:
    run_job(rt, job_id, "prune", lambda job, reporter: _run(rt, job, reporter))


def _run(rt: Runtime, job: ClaimedJob, reporter: JobReporter) -> None:
    assert job.plan_id is not None
    with rt.db.session() as session:
        plan = session.get(Plan, job.plan_id)
        if plan is None:
            reporter.finish(JobStatus.SUCCEEDED, summary="the plan was deleted; nothing pruned")
            return
        volume_ids = _volumes_to_prune(session, plan, targets.names(rt.settings), rt.clock())
    pruned: list[str] = []
    busy: list[str] = []
    failed: list[str] = []
    for volume_id in volume_ids:
        holder = locks.try_lock(rt.db, volume_id, job.id)
        if holder is not None:
            busy.append(volume_id)
            continue
        try:
            _prune_volume(rt, job, volume_id, pruned, failed)
        finally:
            locks.unlock(rt.db, volume_id, job.id)
    summary = f"pruned {len(pruned)} restore points"
    if pruned:
        summary += f" ({', '.join(pruned[:20])}{', ...' if len(pruned) > 20 else ''})"
    if busy:
        summary += (f"; {len(busy)} volumes were being backed up and are pruned after that "
                    "backup")
    if failed:
        reporter.finish(JobStatus.FAILED, summary=summary, error_code="prune_incomplete",
                        error_message=f"{summary}; could not delete: {'; '.join(failed)}")
        return
    reporter.finish(JobStatus.SUCCEEDED, summary=summary)


def _volumes_to_prune(session: Session, plan: Plan, targets: list[str], now: datetime
                      ) -> list[str]:
    """The volumes (in the plan or removed from it: retention covers their restore points
    too) where the retention, evaluated once over the whole plan without any lock, drops a
    restore point. Only those are locked and evaluated again: a plan of 200 volumes whose
    backup just ended has one volume at most to prune, and locking all 200 kept a worker
    thread busy for seconds after every backup. Restore points on a target this service
    no longer configures are kept: no worker could delete them, and the operator may
    configure the target again."""
    tz = schedule.zone(plan.timezone)
    return sorted({group[0][1].volume_id
                   for group in service.plan_restore_points(session, plan.id, targets=targets)
                   if any(not v.keep for v in evaluate(
                       [p for p, _ in group],
                       policy_of(retention_for(plan, group[0][1].target)), tz, now))})


def _prune_volume(rt: Runtime, job: ClaimedJob, volume_id: str, pruned: list[str],
                  failed: list[str]) -> None:
    assert job.plan_id is not None
    plan_id = job.plan_id
    now = rt.clock()
    with rt.db.session() as session:
        plan = session.get(Plan, plan_id)
        if plan is None:
            return
        tz = schedule.zone(plan.timezone)
        unkept: list[RestorePoint] = []
        for group in service.plan_restore_points(session, plan_id, volume_id,
                                                 targets.names(rt.settings)):
            rows = {point.id: rp for point, rp in group}
            policy = policy_of(retention_for(plan, group[0][1].target))
            unkept += [rows[v.point.id] for v in evaluate([p for p, _ in group], policy, tz, now)
                       if not v.keep]
        # Deleting is claimed like a user's delete: available -> deleting, one winner.
        # The lock is checked again in the same statement: one set after the evaluation
        # above still keeps the restore point.
        doomed = [rp for rp in unkept if guarded_update(
            session, RestorePoint, rp.id, RESTORE_POINT_TRANSITIONS, RestorePointStatus.DELETING,
            expect=RestorePointStatus.AVAILABLE, where=(unlocked(now),),
            extra={"status_reason": f"pruned by plan {plan_id}"})]
        session.expunge_all()
    for rp in doomed:
        try:
            delete_restore_point(rt, rp, rp.volume)
            pruned.append(rp.id)
        except (CairnError, JobLost) as exc:  # lost: the restore point's row moved on
            code, message = failure_reason(exc)
            failed.append(f"{rp.id}: {message}")
            with rt.db.session() as session:
                settle_refused_delete(session, rp.id, code,
                                      f"prune could not delete it ({code}): {message}; delete "
                                      "it again to retry")
    for rp in {rp.target: rp for rp in doomed if rp.id in pruned}.values():
        # Best effort: what the target holds beyond its restore points is no one's data.
        for what, step in data_path_of(rt.settings, rp.target).after_delete(
                rt, rp, rp.volume, job.id, locked=True):
            try:
                step()
            except Exception:
                log.warning("prune of plan %s: %s of restore point %s failed", plan_id, what,
                            rp.id, exc_info=True)
