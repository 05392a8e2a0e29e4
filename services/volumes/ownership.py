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

from dataclasses import replace

from services.context import RequestContext
from services.errors import CinderError, VolumeNotFound, VolumeNotOwned
from services.openstack.cinder import CinderGroup, CinderVolume, group_not_found, volume_not_found
from services.openstack.cinder_gateway import CinderGateway
from services.records.volumes import Volume


def foreign(owner: str | None, ctx: RequestContext) -> bool:
    """Whether a Cinder object of a list Cinder made for the caller's token, whose project
    is `owner`, is out of the caller's reach. Cinder lists a token's own project's volumes
    unless asked for `all_tenants` (which Cairn never asks with a caller's token), and names
    their project to administrators only: an unnamed owner in such a list is the caller's
    project. One volume or group asked for by id has no such guarantee: `caller_volume`
    and `caller_group` learn its owner."""
    return owner is not None and owner != ctx.project_id and not ctx.is_admin


def caller_volume(cinder: CinderGateway, ctx: RequestContext, volume_id: str) -> CinderVolume:
    """The Cinder volume `volume_id` as the caller may act on it, asked with the caller's
    token, its owner named; another project's (for anyone but the cloud's administrator) is
    VolumeNotFound, word for word what a missing one answers."""
    found = cinder.for_user(ctx).get(volume_id.lower())
    if found.project_id is None:
        # Cinder did not name the owner to the caller's token, and a policy of Cinder's
        # may show a role other projects' volumes without naming their project: ask as
        # Cairn's service user, to whom Cinder names it. Never assume it is the caller's.
        found = replace(found, project_id=_owner(cinder.as_service().get(found.id).project_id,
                                                 f"volume {found.id}"))
    if foreign(found.project_id, ctx):
        raise volume_not_found(found.id)
    return found


def caller_group(cinder: CinderGateway, ctx: RequestContext, group_id: str, *,
                 field: str = "cinder_group") -> CinderGroup:
    """The Cinder generic volume group `group_id` as the caller may follow it, its owner
    named; another project's answers as a missing one."""
    group = cinder.for_user(ctx).group(group_id.lower(), field=field)
    if group.project_id is None:
        group = replace(group, project_id=_owner(
            cinder.as_service().group(group.id, field=field).project_id, f"group {group.id}"))
    if foreign(group.project_id, ctx):
        raise group_not_found(group_id.lower(), field)
    return group


def _owner(project_id: str | None, what: str) -> str:
    if project_id is None:
        # Only a Cinder whose policy hides the owner from its administrators too.
        raise CinderError(f"Cinder does not name the project of {what} to Cairn's service "
                          "user, so Cairn cannot tell whose it is; the operator's Cinder "
                          "policy must show it to administrators (os-vol-tenant-attr, "
                          "microversion 3.58 for groups)")
    return project_id


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
    if _owner(found.project_id, f"volume {found.id}") != project_id:
        raise VolumeNotOwned(
            f"Cinder volume {volume.cinder_volume_id} now belongs to another project (was it "
            "transferred?), so this project no longer backs it up; its restore points stay. "
            "Remove it from the plans that protect it", volume=volume.cinder_volume_id)
    return found
