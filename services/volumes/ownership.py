"""Which project a Cinder volume or group belongs to, and so who may act on it.

Cinder answers a project's `admin` role about every project's volumes and groups (its
default policy: `admin_api` is the admin role anywhere), so what a caller's token can see
is not the tenancy boundary. Cairn draws it here: a caller acts only on its own project's
volumes and groups, and another project's answers exactly as a missing one (nobody learns
that it exists); only the cloud's administrator (CAIRN_ADMIN_PROJECTS) acts across.

Ownership is checked again when a job starts: Cinder volumes change hands (a volume
transfer), and a plan made before that would go on reading a volume that is now another
project's."""

from __future__ import annotations

from services.context import RequestContext
from services.errors import VolumeNotFound, VolumeNotOwned
from services.openstack.cinder import (
    CinderGateway,
    CinderGroup,
    CinderVolume,
    group_not_found,
    volume_not_found,
)
from services.records.volumes import Volume


def foreign(owner: str | None, ctx: RequestContext) -> bool:
    """Whether a Cinder object whose project is `owner` is out of the caller's reach.
    Cinder names the owner to administrators only; to anyone else it shows nothing but its
    own project's objects, so an unnamed owner is the caller's project."""
    return owner is not None and owner != ctx.project_id and not ctx.is_admin


def caller_volume(cinder: CinderGateway, ctx: RequestContext, volume_id: str) -> CinderVolume:
    """The Cinder volume `volume_id` as the caller may act on it, asked with the caller's
    token; another project's (for anyone but the cloud's administrator) is VolumeNotFound,
    word for word what a missing one answers."""
    found = cinder.for_user(ctx).get(volume_id.lower())
    if foreign(found.project_id, ctx):
        raise volume_not_found(found.id)
    return found


def caller_group(cinder: CinderGateway, ctx: RequestContext, group_id: str, *,
                 field: str = "cinder_group") -> CinderGroup:
    """The Cinder generic volume group `group_id` as the caller may follow it; another
    project's answers as a missing one."""
    group = cinder.for_user(ctx).group(group_id.lower(), field=field)
    if foreign(group.project_id, ctx):
        raise group_not_found(group_id.lower(), field)
    return group


def check_owner(cinder: CinderGateway | None, volume: Volume,
                project_id: str) -> CinderVolume | None:
    """Raise VolumeNotOwned (or VolumeNotFound) unless `project_id` owns the Cinder volume
    behind `volume`; returns what Cinder said of it (None for an RBD image named by an
    administrator: it has no owner in Cinder), so a job asks Cinder once."""
    if volume.cinder_volume_id is None or cinder is None:
        return None
    try:
        found = cinder.as_service().get(volume.cinder_volume_id)
    except VolumeNotFound:
        raise VolumeNotFound(
            f"Cinder volume {volume.cinder_volume_id} no longer exists; remove it from the "
            "plans that protect it", volume=volume.cinder_volume_id) from None
    if found.project_id is not None and found.project_id != project_id:
        raise VolumeNotOwned(
            f"Cinder volume {volume.cinder_volume_id} now belongs to another project (was it "
            "transferred?), so this project no longer backs it up; its restore points stay. "
            "Remove it from the plans that protect it", volume=volume.cinder_volume_id)
    return found
