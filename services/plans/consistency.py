"""What a group plan's volumes must be able to do: join one RBD group, whose snapshot
(`consistency group`) is taken at one instant. An RBD group lives in one Ceph cluster, and
an RBD image is in one group at most, so a group plan's volumes are on one cluster and in
no other group plan; checked when a plan is saved and when a plan following a Cinder group
takes in its volumes."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.errors import Conflict, InvalidInput
from services.records.plans import Plan, PlanVolume
from services.records.volumes import Volume
from services.status import Consistency


def volumes_in_other_group_plans(session: Session, plan_id: str,
                                 volume_ids: Collection[str]) -> dict[str, str]:
    """Of these volumes, those another group plan holds: volume id -> that plan's name (an
    RBD image can be in one RBD group only)."""
    if not volume_ids:
        return {}
    rows = session.execute(
        select(Volume.id, Plan.name)
        .join(PlanVolume, PlanVolume.plan_id == Plan.id)
        .join(Volume, Volume.id == PlanVolume.volume_id)
        .where(Plan.consistency == Consistency.GROUP, Plan.id != plan_id,
               Volume.id.in_(list(volume_ids))))
    return {str(volume_id): str(name) for volume_id, name in rows}


def check(session: Session, plan: Plan) -> None:
    """A group plan's volumes must be able to join one RBD group: one cluster, and no
    other group plan (an RBD image is in one group at most)."""
    if plan.consistency != Consistency.GROUP:
        return
    clusters: dict[str, list[str]] = {}
    for volume in plan.volumes:
        clusters.setdefault(volume.cluster, []).append(volume.public_name)
    if len(clusters) > 1:
        listed = "; ".join(f"{', '.join(sorted(names))} on cluster {cluster!r}"
                           for cluster, names in sorted(clusters.items()))
        raise InvalidInput(
            "consistency group takes one RBD group snapshot, which cannot span Ceph clusters: "
            f"{listed}. Put the volumes of each cluster in a plan of their own",
            field="consistency")
    taken = volumes_in_other_group_plans(session, plan.id, [v.id for v in plan.volumes])
    for volume in plan.volumes:
        if volume.id in taken:
            raise Conflict(
                f"volume {volume.cinder_volume_id or volume.image} is already in group plan "
                f"{taken[volume.id]!r}: an RBD image can be in one RBD group only. Take it "
                "out of that plan, or use consistency volume here", field="consistency")
