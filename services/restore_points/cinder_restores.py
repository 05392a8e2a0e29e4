"""The Cinder side of a restore request, checked while the user waits: the new volume is
created with the user's own token (Cinder applies the user's quota and volume types), and
an in-place restore is refused at once for a volume that is attached, too small or not the
restore point's project's. The worker then takes the volume atomically (os-reserve), so a
server attaching it meanwhile still cannot race the restore.

A new volume belongs to the restore point's project, whoever asks and however: the cloud's
administrator restoring another project's restore point makes it there (by Cairn's service
user, acting in that project, as an instant restore's adoption does), never in its own
project, where another project's data has no business.

An instant restore's volume is adopted later by Cairn's service user, which Cinder lets
use every volume type: the type is checked here, with the user's token, so a tenant gets
no type Cinder would not give it (a private type of another project). Without a type named,
the project's default is asked for with the user's token all the same: an application
credential whose access rules do not reach Cinder cannot have Cinder volumes made through
Cairn's service user, as it could not make them itself (a copy creates with its token)."""

from __future__ import annotations

import json
import logging
from functools import partial

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.context import RequestContext
from services.db import undo_on_rollback
from services.errors import InvalidInput, VolumeInUse, VolumeNotOwned
from services.jobs import repository as jobs
from services.openstack.cinder_gateway import CinderGateway
from services.quotas.service import GIB
from services.records.restore_points import RestorePoint
from services.records.volumes import Volume
from services.restore_points.schemas import NewVolume
from services.volumes.ownership import caller_volume

log = logging.getLogger(__name__)


def volume_size_gb(rp: RestorePoint, spec: NewVolume) -> int:
    """The new volume's size: the request's, at least the restore point's rounded up."""
    needed = -(-(rp.size_bytes or 0) // GIB) or 1
    size = spec.size_gb or needed
    if size < needed:
        raise InvalidInput(f"new_volume.size_gb {size} is smaller than restore point {rp.id} "
                           f"({rp.size_bytes} bytes, so at least {needed} GiB)",
                           field="new_volume.size_gb")
    return size


def volume_type(ctx: RequestContext, cinder: CinderGateway, spec: NewVolume) -> str | None:
    """The id of the volume type the new volume gets, one the caller's own token may use
    (None: Cinder's default type)."""
    if spec.volume_type is None:
        return None
    return cinder.for_user(ctx).volume_type_id(spec.volume_type,
                                               field="new_volume.volume_type")


def adoption_type(ctx: RequestContext, cinder: CinderGateway, rp: RestorePoint,
                  spec: NewVolume) -> str | None:
    """The type an instant restore's volume is adopted with, always asked of Cinder with
    the caller's token: the one named (`volume_type`), else the caller's project's default.
    The default's id is kept only for a volume of the caller's own project; the cloud's
    administrator restoring another project's restore point leaves it to that project's
    default (None)."""
    if spec.volume_type is not None:
        return volume_type(ctx, cinder, spec)
    default = cinder.for_user(ctx).default_volume_type_id()
    return default if rp.project_id == ctx.project_id else None


def adoption_spec(ctx: RequestContext, cinder: CinderGateway, rp: RestorePoint,
                  spec: NewVolume) -> str:
    """For an instant restore into a new Cinder volume: the volume Cinder is to adopt, as
    the job keeps it (JSON). Checked now: the size, the volume type (the caller's to use),
    and that Cairn can act in the restore point's project, where the job adopts the clone
    (Cinder adopts it there for Cairn, an administrator's call)."""
    size = volume_size_gb(rp, spec)
    type_id = adoption_type(ctx, cinder, rp, spec)
    cinder.as_service_in(rp.project_id)
    return json.dumps({"name": spec.name, "size_gb": size, "volume_type": type_id,
                       "description": spec.description
                       or f"restored instantly by Cairn from restore point {rp.id}"})


def create_volume(session: Session, ctx: RequestContext, cinder: CinderGateway,
                  rp: RestorePoint, job_id: str, spec: NewVolume) -> str:
    size = volume_size_gb(rp, spec)
    type_id = volume_type(ctx, cinder, spec)
    # The restore point's project's, as an instant restore's: for the cloud's administrator
    # restoring another project's restore point, made there by Cairn's service user.
    api = (cinder.for_user(ctx) if rp.project_id == ctx.project_id
           else cinder.as_service_in(rp.project_id))
    volume = api.create(
        size_gb=size, name=spec.name, volume_type=type_id,
        description=spec.description or f"restored by Cairn from restore point {rp.id}",
        # Leads back from the volume to the restore that made it.
        metadata={"cairn_restore_point": rp.id, "cairn_restore_job": job_id})
    # Made before the job row commits (the answer names it); if the row never commits,
    # nothing would ever restore into it or remove it.
    undo_on_rollback(session, partial(api.unbudgeted().discard, volume.id),
                     f"Cinder volume {volume.id} made for restore job {job_id}")
    return volume.id


HELD_FOR_RESTORE = "restoring-backup"
"""The status Cinder's backup API gives the volume `openstack volume backup restore` writes
to, until its backup service (with Cairn's driver, Cairn) has written it."""


def check_held_by_cinder_backup(ctx: RequestContext, cinder: CinderGateway, rp: RestorePoint,
                                volume_id: str) -> str:
    """A restore for Cinder's backup service (Cairn's Cinder backup driver): the volume is
    the one Cinder holds for it, of the restore point's project and large enough. Cinder
    set its status and sets it back; Cairn does not take it (os-reserve needs `available`)."""
    volume = caller_volume(cinder, ctx, volume_id)
    if volume.project_id is not None and volume.project_id != rp.project_id:
        raise VolumeNotOwned(
            f"Cinder volume {volume.id} is project {volume.project_id}'s and restore point "
            f"{rp.id} is project {rp.project_id}'s: Cinder's backup restores write a restore "
            "point over a volume of its own project only", volume=volume.id)
    if volume.status != HELD_FOR_RESTORE:
        raise VolumeInUse(
            f"Cinder volume {volume.id} is {volume.status}, not {HELD_FOR_RESTORE}: Cinder's "
            "backup service holds no restore of it. Restore in place without cinder_backup "
            "(a detached volume), or through openstack volume backup restore",
            volume=volume.id, status=volume.status)
    if volume.size_gb * GIB < (rp.size_bytes or 0):
        raise InvalidInput(
            f"Cinder volume {volume.id} is {volume.size_gb} GiB, smaller than restore point "
            f"{rp.id} ({rp.size_bytes} bytes)", field="volume_id")
    return volume.id


def check_in_place(session: Session, ctx: RequestContext, cinder: CinderGateway,
                   rp: RestorePoint, volume_id: str) -> str:
    volume = caller_volume(cinder, ctx, volume_id)
    if volume.project_id is not None and volume.project_id != rp.project_id:
        # The cloud's administrator, who sees every project's volumes: a restore in place
        # would write one project's data into another project's volume.
        raise VolumeNotOwned(
            f"Cinder volume {volume.id} is project {volume.project_id}'s and restore point "
            f"{rp.id} is project {rp.project_id}'s: a restore in place writes a restore point "
            "over a volume of its own project only. Restore into a new volume (new_volume), "
            "or over a volume of that project", volume=volume.id)
    if volume.attached_to or volume.status == "in-use":
        servers = ", ".join(volume.attached_to) or "a server"
        raise VolumeInUse(
            f"Cinder volume {volume.id} is attached to {servers}: a restore in place would "
            "overwrite the disk under a running server. Detach it first (openstack server "
            "remove volume), or restore into a new volume (new_volume)",
            volume=volume.id, status=volume.status)
    if volume.status != "available":
        raise VolumeInUse(
            f"Cinder volume {volume.id} is {volume.status}; a restore in place needs it "
            "available (detached and idle)", volume=volume.id, status=volume.status)
    if volume.size_gb * GIB < (rp.size_bytes or 0):
        raise InvalidInput(
            f"Cinder volume {volume.id} is {volume.size_gb} GiB, smaller than restore point "
            f"{rp.id} ({rp.size_bytes} bytes); extend it (openstack volume set --size) or "
            "restore into a new volume", field="volume_id")
    own = session.scalars(select(Volume.id).where(Volume.cinder_volume_id == volume.id)).all()
    for volume_row in own:
        running = jobs.active_backup_for_volume(session, volume_row)
        if running is not None:
            raise VolumeInUse(f"a backup of Cinder volume {volume.id} is running (job "
                              f"{running.id}); restore in place after it finishes",
                              volume=volume.id, job_id=running.id)
    return volume.id
