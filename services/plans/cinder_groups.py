"""Plans that follow a Cinder generic volume group: the scheduler keeps each such plan's
volumes in step with the group's (every `cinder_group_sync_seconds`), so a volume added to
the group in Cinder is protected from the plan's next run, and one taken out is no longer
backed up (its restore points stay). A run now syncs first, with the caller's token.

Cairn's service user asks Cinder here, as an administrator, because no tenant's token is
at hand in the scheduler. A member only joins the plan if it is a volume of the plan's own
project and no other group plan holds it (an RBD image is in one RBD group at most); either
refusal is logged and retried at the next sync, and the rest of the group still syncs."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from services.db import Database
from services.errors import CairnError
from services.openstack.cinder import CinderApi, CinderGateway
from services.plans import service
from services.plans.members import group_member
from services.records.plans import Plan
from services.records.volumes import Volume
from services.settings import Settings
from services.status import Consistency

log = logging.getLogger(__name__)


@dataclass
class GroupSync:
    plans: int = 0
    changed: list[str] = field(default_factory=list)
    """Ids of the plans whose volumes changed."""
    errors: list[str] = field(default_factory=list)


def sync_all(db: Database, settings: Settings, gateway: CinderGateway,
             now: datetime) -> GroupSync:
    """Each plan that follows a group, in its own transaction: one plan's trouble (its group
    deleted, Cinder refusing) does not hold up the others."""
    result = GroupSync()
    with db.reading() as session:
        plan_ids = list(session.scalars(select(Plan.id)
                                        .where(Plan.cinder_group_id.is_not(None))
                                        .order_by(Plan.id)))
    cinder = gateway.as_service()
    for plan_id in plan_ids:
        result.plans += 1
        try:
            with db.session() as session:
                # Locked: a request may be changing the same plan's volumes.
                plan = session.get(Plan, plan_id, with_for_update=True)
                if plan is None or plan.cinder_group_id is None:
                    continue  # deleted, or stopped following, since the list
                if follow(session, settings, gateway, cinder, plan, now):
                    result.changed.append(plan_id)
        except (CairnError, SQLAlchemyError) as exc:
            result.errors.append(f"plan {plan_id}: {exc}")
    return result


def follow(session: Session, settings: Settings, gateway: CinderGateway, cinder: CinderApi,
           plan: Plan, now: datetime) -> bool:
    """Make the plan's volumes the group's; True when they changed."""
    assert plan.cinder_group_id is not None
    members = cinder.group_volume_ids(plan.cinder_group_id)
    have = {v.cinder_volume_id: v for v in plan.volumes if v.cinder_volume_id is not None}
    wanted: list[Volume] = []
    for volume_id in members:
        known = have.get(volume_id)
        if known is not None:
            wanted.append(known)
            continue
        joining = group_member(session, gateway, cinder, plan.project_id,
                               plan.cinder_group_id, volume_id)
        if joining is not None:
            wanted.append(joining)
    if plan.consistency == Consistency.GROUP:
        taken = service.volumes_in_other_group_plans(session, plan.id, [v.id for v in wanted])
        for volume in [v for v in wanted if v.id in taken]:
            log.warning("Cinder group %s: volume %s stays out of plan %s, as group plan %r "
                        "holds it (an RBD image is in one RBD group only)",
                        plan.cinder_group_id, volume.cinder_volume_id, plan.id,
                        taken[volume.id])
        wanted = [v for v in wanted if v.id not in taken]
    return service.set_volumes(session, settings, plan, wanted, now)
