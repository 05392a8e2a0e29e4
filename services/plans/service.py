"""Plans: create and change them (every rule, zone and window validated with a message a
user can act on), pause and resume them, run them now, and show what they will do: their
next slots and which restore points their retention keeps."""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from services import targets
from services.context import RequestContext
from services.errors import InvalidInput, PlanNameTaken, ServiceUnavailable
from services.jobs import factory
from services.jobs import repository as jobs_repository
from services.jobs.service import drop_unstarted_restore_points
from services.jobs.submit import Duplicate, submit
from services.plans import consistency, drafts, members, repository, schedule, timing
from services.plans.drafts import DraftPreview, ExistingVerdicts, PlanDraft
from services.plans.retention import Point, evaluate
from services.plans.rules import stored_rules
from services.plans.schemas import (
    NextRun,
    PlanCreate,
    PlanUpdate,
    RetentionItem,
    RetentionPreview,
    RunNow,
    policy_of,
)
from services.quotas import service as quotas
from services.records.groups import RestorePointGroup
from services.records.jobs import Job
from services.records.plans import Plan, Retention
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.restore_points import copies
from services.restore_points import factory as rp_factory
from services.restore_points import repository as restore_points
from services.settings import Settings
from services.status import (
    ACTIVE_JOB_STATUSES,
    JOB_TRANSITIONS,
    Consistency,
    JobKind,
    JobStatus,
    PlanStatus,
    RestorePointStatus,
    guarded_update_where,
)
from services.volumes.resolve import VolumeResolver
from services.webhooks import events as webhook_events
from services.webhooks import openstack

log = logging.getLogger(__name__)


def create_plan(session: Session, ctx: RequestContext, settings: Settings,
                volumes_from: VolumeResolver, request: PlanCreate, now: datetime) -> Plan:
    target = targets.resolve(settings, request.target).name
    schedule.zone(request.timezone)
    rules = stored_rules(request.rules, request.timezone, now, settings)
    plan = Plan(project_id=ctx.project_id, name=request.name, description=request.description,
                target=target, timezone=request.timezone, rules=rules,
                window_start=request.window.start if request.window else None,
                window_end=request.window.end if request.window else None,
                retention=request.retention, verify_policy=request.verify,
                qos_bytes_per_second=request.qos_bytes_per_second,
                qos_ops_per_second=request.qos_ops_per_second,
                status=PlanStatus.ENABLED if request.enabled else PlanStatus.PAUSED,
                consistency=request.chosen_consistency(), copy_policy=request.offsite,
                created_at=now, updated_at=now)
    _check_copy_policy(settings, plan)
    timing.window_of(plan)  # validates the window's times
    if request.cinder_group is not None:
        plan.cinder_group_id = request.cinder_group.lower()
        group = members.caller_group(ctx, volumes_from, plan.cinder_group_id)
        quotas.require_room(session, ctx.project_id, len(group.volume_ids))
        plan.volumes = members.joining(session, volumes_from, group, plan.project_id)
    else:
        quotas.require_room(session, ctx.project_id, len(request.volumes))
        plan.volumes = _volumes(session, ctx, volumes_from, request.volumes, plan.project_id)
    consistency.check(session, plan)
    plan.next_slot_at = timing.next_slot_after(plan, now)
    _save(session, plan)
    announce(session, settings, plan, "plan.create.end", now)
    return plan


def update_plan(session: Session, ctx: RequestContext, settings: Settings,
                volumes_from: VolumeResolver, plan_id: str, change: PlanUpdate,
                now: datetime) -> Plan:
    plan = repository.get(session, ctx, plan_id)
    given = change.model_fields_set
    if given & {"cinder_group", "volumes"}:
        lock_membership(session, plan)  # before any change: it reads the row afresh
    if "target" in given:
        plan.target = targets.resolve(settings, change.target).name
    if "timezone" in given and change.timezone is not None:
        schedule.zone(change.timezone)
        plan.timezone = change.timezone
    if "rules" in given and change.rules is not None:
        plan.rules = stored_rules(change.rules, plan.timezone, now, settings)
    if "window" in given:
        plan.window_start = change.window.start if change.window else None
        plan.window_end = change.window.end if change.window else None
    for field in ("name", "description", "qos_bytes_per_second", "qos_ops_per_second"):
        if field in given:
            setattr(plan, field, getattr(change, field))
    if "retention" in given and change.retention is not None:
        plan.retention = change.retention
    if "verify" in given and change.verify is not None:
        plan.verify_policy = change.verify
    # An administrator changing another project's plan acts for that project: the
    # volumes stay (or become) that project's, never the administrator's.
    owner = ctx.acting_for(plan.project_id)
    if "cinder_group" in given:
        plan.cinder_group_id = change.cinder_group.lower() if change.cinder_group else None
        if plan.cinder_group_id is not None:
            plan.volumes = members.joining(session, volumes_from, members.caller_group(
                owner, volumes_from, plan.cinder_group_id), plan.project_id)
    if "volumes" in given and change.volumes is not None:
        if plan.cinder_group_id is not None:
            raise InvalidInput(
                f"this plan follows Cinder group {plan.cinder_group_id}: its volumes are the "
                "group's. Add or remove volumes in the group in Cinder, or stop following it "
                "(cinder_group null) to list volumes here", field="volumes")
        plan.volumes = _volumes(session, owner, volumes_from, change.volumes, plan.project_id)
    if "consistency" in given and change.consistency is not None:
        plan.consistency = change.consistency
    if "offsite" in given:
        plan.copy_policy = change.offsite
    if given & {"offsite", "target"}:
        _check_copy_policy(settings, plan)
    if given & {"volumes", "consistency", "cinder_group"}:
        consistency.check(session, plan)
    if given & {"rules", "timezone"}:  # a new timezone must still suit every rule
        schedule.check_rules(timing.rules_of(plan), now, settings.schedule_min_interval)
    timing.window_of(plan)
    if given & {"rules", "timezone"}:
        # New rules start with their next slot; slots of the old rules are not made up.
        plan.next_slot_at = timing.next_slot_after(plan, now)
    plan.updated_at = now
    _save(session, plan)
    announce(session, settings, plan, "plan.update.end", now)
    return plan


def _check_copy_policy(settings: Settings, plan: Plan) -> None:
    policy = plan.copy_policy
    if policy is None:
        return
    copies.check_copy_route(settings, plan.target,
                            targets.resolve(settings, policy.target).name,
                            source="the plan's backup", field="offsite.target")


def delete_plan(session: Session, ctx: RequestContext, settings: Settings, plan_id: str,
                now: datetime) -> None:
    """The plan goes; its restore points stay (they are the tenant's data: delete them one
    by one) and its jobs that have not started are cancelled."""
    plan = repository.get(session, ctx, plan_id)
    waiting = list(session.scalars(select(Job.id).where(
        Job.plan_id == plan.id, Job.status == JobStatus.QUEUED, Job.attempt == 0)))
    guarded_update_where(
        session, Job, JOB_TRANSITIONS, JobStatus.CANCELLED, expect=JobStatus.QUEUED,
        where=(Job.id.in_(waiting), Job.attempt == 0),
        extra={"finished_at": now, "error_code": "plan_deleted",
               "error_message": "the plan was deleted before this job started"})
    # Its off-site copies waiting in the queue already have their restore points.
    drop_unstarted_restore_points(session, waiting, now,
                                  "its plan was deleted before it started")
    announce(session, settings, plan, "plan.delete.end", now)
    session.delete(plan)
    session.flush()


def announce(session: Session, settings: Settings, plan: Plan, event_type: str,
             now: datetime) -> None:
    """The plan's event for the project's webhooks (and the cloud's notification bus), in
    this transaction."""
    webhook_events.record(session, plan.project_id, event_type, subject=plan.id, now=now,
                          notify_openstack=openstack.enabled(settings),
                          data={"tenant_id": plan.project_id, "plan_id": plan.id,
                                "name": plan.name, "status": str(plan.status),
                                "target": plan.target,
                                "volumes": sorted(v.public_name for v in plan.volumes)})


def set_status(session: Session, ctx: RequestContext, plan_id: str, status: PlanStatus,
               now: datetime) -> Plan:
    """Pause: no new jobs (queued ones still run). Resume: the schedule continues with the
    next slot after now; slots that fell while paused are not made up."""
    plan = repository.get(session, ctx, plan_id)
    if plan.status != status:
        plan.status = status
        if status == PlanStatus.ENABLED:
            plan.next_slot_at = timing.next_slot_after(plan, now)
        plan.updated_at = now
        session.flush()
    return plan


def run_now(session: Session, ctx: RequestContext, settings: Settings,
            volumes_from: VolumeResolver, plan_id: str, request: RunNow,
            now: datetime) -> tuple[list[Job], list[dict[str, str]]]:
    """One backup per volume of the plan now (with the plan's target, QoS and retention; not
    bound to its window). A volume whose backup is already queued or running is skipped. A
    plan following a Cinder group backs up the group's volumes as Cinder lists them now."""
    plan = repository.get(session, ctx, plan_id)
    if plan.cinder_group_id is not None:
        _follow_group_now(session, ctx, settings, volumes_from, plan, now)
    busy = jobs_repository.volumes_with_active_backup(session, [v.id for v in plan.volumes])
    free = [v for v in plan.volumes if v.id not in busy]
    room = sum(quotas.estimate(session, v.id, plan.target, request.kind) for v in free) \
        if quotas.has_storage_limit(session, plan.project_id) else 0
    quotas.require_room(session, plan.project_id, len(free), room)
    jobs: list[Job] = []
    skipped = [{"volume": v.ref, "reason": "a backup of this volume is already queued or "
                "running"} for v in plan.volumes if v.id in busy]
    group_id = None
    if plan.consistency == Consistency.GROUP and free:
        group = RestorePointGroup(**rp_factory.group(project_id=plan.project_id,
                                                     plan_id=plan.id, now=now))
        session.add(group)
        session.flush()
        group_id = group.id
    for volume in free:
        try:
            jobs.append(submit(session, factory.backup(
                project_id=plan.project_id, volume_id=volume.id, target=plan.target,
                kind=request.kind, plan_id=plan.id, max_attempts=settings.job_max_attempts,
                qos=factory.Qos(plan.qos_bytes_per_second, plan.qos_ops_per_second),
                now=now, group_id=group_id), unique=True))
        except Duplicate:
            skipped.append({"volume": volume.ref, "reason": "a backup of this volume started "
                            "at the same moment"})
    return jobs, skipped


def next_runs(plan: Plan, after: datetime, count: int) -> list[NextRun]:
    window = timing.window_of(plan)
    tz = schedule.zone(plan.timezone)
    return [NextRun(at=slot.at, local=slot.at.astimezone(tz).isoformat(),
                    timezone=plan.timezone, kind=slot.kind,
                    starts_at=window.next_open(slot.at) if window else slot.at)
            for slot in schedule.slots(timing.rules_of(plan), after, count=count)]


def retention_preview(session: Session, plan: Plan, now: datetime,
                      retention: Retention | None = None, timezone: str | None = None,
                      ) -> RetentionPreview:
    """The plan's restore points judged by its retention, or by a retention and timezone
    being written in the editor (what the first prune after saving them would do)."""
    retention = retention or plan.retention
    tz = schedule.zone(timezone or plan.timezone)
    items: list[RetentionItem] = []
    for group in plan_restore_points(session, plan.id):
        rows = {point.id: rp for point, rp in group}
        for verdict in evaluate([p for p, _ in group], policy_of(retention), tz, now):
            rp = rows[verdict.point.id]
            items.append(RetentionItem(
                restore_point_id=rp.id, volume=rp.volume.ref, target=rp.target,
                created_at=rp.created_at, local_date=rp.created_at.astimezone(tz).date()
                .isoformat(), kind=rp.kind, keep=verdict.keep, kept_by=verdict.kept_by))
    return RetentionPreview(plan_id=plan.id, retention=retention, evaluated_at=now,
                            restore_points=items)


def preview_draft(session: Session, ctx: RequestContext, settings: Settings, draft: PlanDraft,
                  now: datetime) -> DraftPreview:
    """A draft's preview; for the draft of an existing plan (`plan_id`), also what its
    retention would keep of the plan's restore points and what it would prune."""
    result = drafts.preview(draft, settings, now)
    if draft.plan_id is None:
        return result
    plan = repository.get(session, ctx, draft.plan_id)
    judged = retention_preview(session, plan, now, draft.retention, draft.timezone)
    shown = sorted(judged.restore_points, key=lambda i: i.created_at, reverse=True)
    result.existing = ExistingVerdicts(
        kept=sum(i.keep for i in shown), pruned=sum(not i.keep for i in shown),
        restore_points=shown[:drafts.MAX_EXISTING_SHOWN])
    return result


def plan_restore_points(session: Session, plan_id: str, volume_id: str | None = None,
                        targets: Collection[str] | None = None,
                        ) -> list[list[tuple[Point, RestorePoint]]]:
    """The plan's available restore points (of one volume, on these targets, when given) as
    retention points, one group per (volume, target), each marked when a queued or running
    restore or verify reads it."""
    stmt = select(RestorePoint).where(RestorePoint.plan_id == plan_id,
                                      RestorePoint.status == RestorePointStatus.AVAILABLE)
    if volume_id is not None:
        stmt = stmt.where(RestorePoint.volume_id == volume_id)
    if targets is not None:
        stmt = stmt.where(RestorePoint.target.in_(targets))
    rows = list(session.scalars(stmt))
    in_use = set(session.scalars(
        select(Job.restore_point_id).where(
            Job.restore_point_id.in_([r.id for r in rows]),
            Job.kind.in_([JobKind.RESTORE, JobKind.VERIFY]),
            Job.status.in_(ACTIVE_JOB_STATUSES)))) if rows else set()
    in_use |= set(restore_points.copying_from(session, [r.id for r in rows]))
    groups: dict[tuple[str, str], list[tuple[Point, RestorePoint]]] = {}
    for rp in rows:
        point = Point(rp.id, rp.created_at, rp.locked_until, rp.id in in_use)
        groups.setdefault((rp.volume_id, rp.target), []).append((point, rp))
    return list(groups.values())


def _follow_group_now(session: Session, ctx: RequestContext, settings: Settings,
                      volumes_from: VolumeResolver, plan: Plan, now: datetime) -> None:
    """Bring the plan's volumes in step with its Cinder group before a run. When Cinder
    cannot answer, the run goes on with the volumes of the last sync: a backup of what the
    plan knows beats no backup."""
    lock_membership(session, plan)
    if plan.cinder_group_id is None:
        return  # stopped following meanwhile
    owner = ctx.acting_for(plan.project_id)
    try:
        wanted = members.joining(session, volumes_from, members.caller_group(
            owner, volumes_from, plan.cinder_group_id), plan.project_id)
    except ServiceUnavailable:
        log.warning("Cinder did not answer for group %s of plan %s; running its last known "
                    "volumes", plan.cinder_group_id, plan.id)
        return
    set_volumes(session, settings, plan, wanted, now)


def set_volumes(session: Session, settings: Settings, plan: Plan, wanted: list[Volume],
                now: datetime) -> bool:
    """Make `wanted` the volumes of a plan that follows its Cinder group, checked as a save
    checks them; True when they changed. The caller holds `lock_membership`."""
    if {v.id for v in wanted} == {v.id for v in plan.volumes}:
        return False
    log.info("plan %s follows Cinder group %s: %d volumes, was %d", plan.id,
             plan.cinder_group_id, len(wanted), len(plan.volumes))
    plan.volumes = wanted
    consistency.check(session, plan)
    plan.updated_at = now
    session.flush()
    announce(session, settings, plan, "plan.update.end", now)
    return True


def lock_membership(session: Session, plan: Plan) -> None:
    """Lock the plan's row until the transaction ends and read its volumes afresh: the
    scheduler's group sync and a request may both be changing them (without the lock, the
    second to write deleted rows the first had already deleted). SQLite serializes writers
    by itself."""
    session.refresh(plan, with_for_update=True)
    session.expire(plan, ["volumes"])


def _volumes(session: Session, ctx: RequestContext, volumes_from: VolumeResolver,
             refs: list[str], project_id: str) -> list[Volume]:
    out: list[Volume] = []
    for i, text in enumerate(refs):
        volume = volumes_from.resolve(session, ctx, text, field=f"volumes.{i}")
        if volume.project_id != project_id:
            raise InvalidInput(
                f"volumes.{i} {text!r} belongs to project {volume.project_id}, not to the "
                f"plan's project {project_id}; protect it with a plan of its own project",
                field=f"volumes.{i}")
        if volume not in out:
            out.append(volume)
    return out


def _save(session: Session, plan: Plan) -> None:
    try:
        with session.begin_nested():
            session.add(plan)
    except IntegrityError:
        raise PlanNameTaken(f"this project already has a plan named {plan.name!r}; choose "
                            "another name", name=plan.name) from None
