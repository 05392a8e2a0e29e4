"""The project's protection at a glance (the portal's Overview): how many of its Cinder
volumes an enabled plan covers, which covered volumes have fallen behind their plan (the
newest restore point older than 1.5 times the plan's interval), and the next runs."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise
from statistics import median

from pydantic import BaseModel, Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.context import RequestContext
from services.openstack.cinder_gateway import CinderGateway
from services.plans import schedule, timing
from services.records.plans import Plan, PlanVolume
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.status import PlanStatus, RestorePointKind, RestorePointStatus
from services.volumes.ownership import foreign

STALE_FACTOR = 1.5
"""A volume is behind when its newest restore point is older than this many intervals."""
NEXT_RUNS = 5
_SLOTS_FOR_INTERVAL = 9


class StaleVolume(BaseModel):
    volume: str = Field(description="The Cinder volume's id, or cluster/pool/image")
    name: str | None = Field(description="Cinder's name for it, when known")
    plan_id: str
    plan_name: str
    interval_seconds: float = Field(description="The plan's usual time between runs")
    newest_at: datetime | None = Field(description="Its newest available restore point; "
                                                   "null when it has none")


class UpcomingRun(BaseModel):
    plan_id: str
    plan_name: str
    timezone: str
    at: datetime
    kind: RestorePointKind
    volumes: int


class ProtectionOverview(BaseModel):
    volumes: int | None = Field(description="The project's Cinder volumes; null without "
                                             "Cinder")
    protected: int | None = Field(description="Of those, covered by an enabled plan")
    unprotected: int | None
    stale: list[StaleVolume] = Field(
        description=f"Covered volumes whose newest restore point is older than "
                    f"{STALE_FACTOR} times their plan's interval, oldest first")
    next_runs: list[UpcomingRun] = Field(description="The next runs of the enabled plans")


def overview(session: Session, ctx: RequestContext, cinder: CinderGateway | None,
             now: datetime) -> ProtectionOverview:
    plans = list(session.scalars(select(Plan).where(Plan.project_id == ctx.project_id,
                                                    Plan.status == PlanStatus.ENABLED)))
    upcoming: dict[str, list[schedule.Slot]] = {
        plan.id: schedule.slots(timing.rules_of(plan), now, count=_SLOTS_FOR_INTERVAL)
        for plan in plans}
    covering: dict[str, list[Plan]] = {}
    for volume_id, plan_id in session.execute(
            select(PlanVolume.volume_id, PlanVolume.plan_id)
            .where(PlanVolume.plan_id.in_([p.id for p in plans]))):
        covering.setdefault(volume_id, []).extend(p for p in plans if p.id == plan_id)

    names: dict[str, str] = {}
    counts: tuple[int | None, int | None] = (None, None)
    if cinder is not None:
        found = [v for v in cinder.for_user(ctx).list_volumes()
                 if not foreign(v.project_id, ctx)]
        names = {v.id: v.name for v in found}
        covered = set(session.scalars(select(Volume.cinder_volume_id).where(
            Volume.id.in_(covering), Volume.cinder_volume_id.in_(names))))
        counts = (len(found), len(covered))

    return ProtectionOverview(
        volumes=counts[0], protected=counts[1],
        unprotected=None if counts[0] is None or counts[1] is None else counts[0] - counts[1],
        stale=_stale(session, covering, upcoming, names, now),
        next_runs=_next_runs(plans, upcoming, covering))


def _interval(slots: list[schedule.Slot]) -> timedelta | None:
    gaps = [(b.at - a.at).total_seconds() for a, b in pairwise(slots)]
    return timedelta(seconds=median(gaps)) if gaps else None


def _stale(session: Session, covering: dict[str, list[Plan]],
           upcoming: dict[str, list[schedule.Slot]], names: dict[str, str], now: datetime,
           ) -> list[StaleVolume]:
    newest: dict[str, datetime] = dict(session.execute(
        select(RestorePoint.volume_id, func.max(RestorePoint.created_at))
        .where(RestorePoint.volume_id.in_(covering),
               RestorePoint.status == RestorePointStatus.AVAILABLE)
        .group_by(RestorePoint.volume_id)).all())
    volumes = {v.id: v for v in session.scalars(select(Volume).where(
        Volume.id.in_(covering)))}
    out: list[StaleVolume] = []
    for volume_id, plans in covering.items():
        timed = [(interval, plan) for plan in plans
                 if (interval := _interval(upcoming[plan.id])) is not None]
        if not timed:
            continue
        interval, plan = min(timed, key=lambda t: t[0])
        # A volume never backed up is behind once its plan has had the time to run.
        since = newest.get(volume_id) or plan.created_at
        if now - since <= interval * STALE_FACTOR:
            continue
        volume = volumes[volume_id]
        out.append(StaleVolume(
            volume=volume.public_name, name=names.get(volume.cinder_volume_id or ""),
            plan_id=plan.id, plan_name=plan.name, interval_seconds=interval.total_seconds(),
            newest_at=newest.get(volume_id)))
    return sorted(out, key=lambda s: (s.newest_at is not None, s.newest_at or now))


def _next_runs(plans: list[Plan], upcoming: dict[str, list[schedule.Slot]],
               covering: dict[str, list[Plan]]) -> list[UpcomingRun]:
    size = {plan.id: sum(plan in ps for ps in covering.values()) for plan in plans}
    runs = [UpcomingRun(plan_id=plan.id, plan_name=plan.name, timezone=plan.timezone,
                        at=slot.at, kind=slot.kind, volumes=size[plan.id])
            for plan in plans for slot in upcoming[plan.id][:NEXT_RUNS]]
    return sorted(runs, key=lambda r: (r.at, r.plan_name))[:NEXT_RUNS]
