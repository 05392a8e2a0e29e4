"""Group restore points: the restore points one run of a group plan made from one RBD group
snapshot, and restoring all of them to the same instant at once (all or nothing: one
member that cannot be restored refuses the whole request, and nothing is queued)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.context import RequestContext
from services.errors import InvalidInput, NotFound, RestorePointBusy
from services.openstack.cinder_gateway import CinderGateway
from services.records.groups import RestorePointGroup
from services.records.jobs import Job
from services.records.restore_points import RestorePoint
from services.restore_points import service
from services.restore_points.schemas import GroupRestoreCreate, NewVolume, RestoreCreate
from services.settings import Settings
from services.status import RestorePointStatus
from services.storage.ceph import CephClusters


def get(session: Session, ctx: RequestContext,
        group_id: str) -> tuple[RestorePointGroup, list[RestorePoint]]:
    group = session.get(RestorePointGroup, group_id)
    if group is None or not ctx.sees(group.project_id):
        raise NotFound(f"restore point group {group_id} not found", group_id=group_id)
    members = list(session.scalars(
        select(RestorePoint).where(RestorePoint.group_id == group.id,
                                   RestorePoint.status != RestorePointStatus.DELETED)
        .order_by(RestorePoint.volume_id)))
    return group, members


def restore(session: Session, ctx: RequestContext, settings: Settings, clusters: CephClusters,
            cinder: CinderGateway | None, group_id: str,
            request: GroupRestoreCreate) -> list[Job]:
    group, members = get(session, ctx, group_id)
    if group.taken_at is None or not members:
        raise RestorePointBusy(f"restore point group {group.id} has no restore points yet; "
                               "its run has not taken its snapshot", group_id=group.id)
    pending = [m for m in members if m.status != RestorePointStatus.AVAILABLE]
    if pending:
        listed = ", ".join(f"{m.id} ({m.status})" for m in pending)
        raise RestorePointBusy(
            f"restore point group {group.id} is not complete: {listed}. A group restore "
            "brings back every volume of the instant or none; restore the available ones "
            "one by one if that is what you need", group_id=group.id)
    jobs = []
    for rp in members:
        jobs.append(service.start_restore(session, ctx, settings, clusters, cinder, rp.id,
                                          _member_request(rp, request)))
    return jobs


def _member_request(rp: RestorePoint, request: GroupRestoreCreate) -> RestoreCreate:
    qos = {"qos_bytes_per_second": request.qos_bytes_per_second,
           "qos_ops_per_second": request.qos_ops_per_second, "mode": request.mode}
    if request.in_place:
        if rp.volume.cinder_volume_id is None:
            raise InvalidInput(f"restore point {rp.id} is of the RBD image {rp.volume.ref}, "
                               "not a Cinder volume: restore the group into new images "
                               "(target_prefix) instead", field="in_place")
        return RestoreCreate(volume_id=rp.volume.cinder_volume_id, **qos)
    if request.name_prefix is not None:
        name = f"{request.name_prefix}{rp.volume.cinder_volume_id or rp.volume.image}"
        return RestoreCreate(new_volume=NewVolume(name=name[:255]), **qos)
    assert request.target_prefix is not None
    return RestoreCreate(target=f"{request.target_prefix}{rp.volume.image}", **qos)
