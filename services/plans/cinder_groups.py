"""Plans that follow a Cinder generic volume group: the scheduler keeps each such plan's
volumes in step with the group's (every `cinder_group_sync_seconds`), so a volume added to
the group in Cinder is protected from the plan's next run, and one taken out is no longer
backed up (its restore points stay). A run now syncs first, with the caller's token.

Cairn's service user asks Cinder here, as an administrator, because no tenant's token is
at hand in the scheduler: the group, and its volumes of the plan's own project
(`members.group_members`, one list whatever the group holds). Every member is asked about
at every sync, those the plan already has too: a member transferred to another project
leaves the plan at the next sync. A member of another project, or one another group plan
holds (an RBD image is in one RBD group at most), stays out; what stays out is logged
when it changes, not at every sync, and the rest of the group still syncs."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from services.db import Database
from services.errors import CairnError
from services.openstack.cinder_gateway import CinderGateway
from services.plans import consistency, service
from services.plans.members import group_members
from services.records.plans import Plan
from services.settings import Settings
from services.status import Consistency

log = logging.getLogger(__name__)


@dataclass
class GroupSync:
    plans: int = 0
    changed: list[str] = field(default_factory=list)
    """Ids of the plans whose volumes changed."""
    errors: list[str] = field(default_factory=list)


LeftOut = dict[str, tuple[str, ...]]
"""Per plan, what the scheduler last logged of the members its group leaves out."""


def sync_all(db: Database, settings: Settings, gateway: CinderGateway, now: datetime,
             said: LeftOut | None = None) -> GroupSync:
    """Each plan that follows a group, in its own transaction: one plan's trouble (its group
    deleted, Cinder refusing) does not hold up the others. `said`: what the scheduler
    last logged of each plan's left-out members."""
    result = GroupSync()
    said = said if said is not None else {}
    with db.reading() as session:
        plan_ids = list(session.scalars(select(Plan.id)
                                        .where(Plan.cinder_group_id.is_not(None))
                                        .order_by(Plan.id)))
    for plan_id in plan_ids:
        result.plans += 1
        try:
            with db.session() as session:
                # Locked: a request may be changing the same plan's volumes.
                plan = session.get(Plan, plan_id, with_for_update=True)
                if plan is None or plan.cinder_group_id is None:
                    continue  # deleted, or stopped following, since the list
                if follow(session, settings, gateway, plan, now, said):
                    result.changed.append(plan_id)
        except (CairnError, SQLAlchemyError) as exc:
            result.errors.append(f"plan {plan_id}: {exc}")
    for gone in said.keys() - set(plan_ids):
        del said[gone]
    return result


def follow(session: Session, settings: Settings, gateway: CinderGateway, plan: Plan,
           now: datetime, said: LeftOut) -> bool:
    """Make the plan's volumes the group's of its project; True when they changed."""
    assert plan.cinder_group_id is not None
    group = gateway.as_service().group(plan.cinder_group_id)
    members = group_members(session, gateway, group, plan.project_id)
    wanted = members.joining
    notes = [f"{volume_id} (not project {plan.project_id}'s, or gone)"
             for volume_id in members.left_out]
    if plan.consistency == Consistency.GROUP:
        taken = consistency.volumes_in_other_group_plans(session, plan.id, [v.id for v in wanted])
        notes += [f"{v.cinder_volume_id} (group plan {taken[v.id]!r} holds it: an RBD image "
                  "is in one RBD group only)" for v in wanted if v.id in taken]
        wanted = [v for v in wanted if v.id not in taken]
    if said.get(plan.id, ()) != tuple(notes):
        said[plan.id] = tuple(notes)
        if notes:
            log.warning("Cinder group %s: plan %s leaves out %s", plan.cinder_group_id,
                        plan.id, "; ".join(notes))
    return service.set_volumes(session, settings, plan, wanted, now)
