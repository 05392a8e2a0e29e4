"""Which volumes of a Cinder group join the plan that follows it: the group's volumes of the
plan's own project, asked of Cinder as Cairn's service user in one list of the group's
volumes filtered by project (`CinderApi.group_volumes`), at a request (the caller's token
has shown the group is the caller's) as at the scheduler's sync. Cinder lets a project's
admin put another project's volume in a group, and a volume transfer hands a member to
another project while it stays in the group: neither is the plan's, and both stay out,
like a member deleted since. Each sync asks again for every member, so a member given away
leaves the plan at the next sync, and a list costs one call (a page of 1000) however many
foreign volumes the group holds."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from services.context import RequestContext
from services.errors import InvalidInput
from services.openstack.cinder import CinderGroup
from services.openstack.cinder_gateway import CinderGateway
from services.records.volumes import Volume
from services.volumes import ownership
from services.volumes import repository as volumes
from services.volumes.resolve import VolumeResolver


@dataclass(frozen=True)
class GroupMembers:
    joining: list[Volume]
    """The Volume rows of the group's volumes of the plan's project."""
    left_out: list[str]
    """The ids of the group's other volumes (another project's, or gone), sorted."""


def group_members(session: Session, gateway: CinderGateway, group: CinderGroup,
                  project_id: str) -> GroupMembers:
    found = gateway.as_service().group_volumes(group.id, project_id)
    return GroupMembers(
        joining=[volumes.get_or_create(session, project_id, gateway.image_ref(volume.id),
                                       cinder_volume_id=volume.id) for volume in found],
        left_out=sorted(set(group.volume_ids) - {volume.id for volume in found}))


def caller_group(ctx: RequestContext, volumes_from: VolumeResolver,
                 group_id: str) -> CinderGroup:
    """A Cinder generic volume group the caller may follow, asked with the caller's token:
    another project's is not found, also for a project's admin, whom Cinder shows it."""
    if volumes_from.cinder is None:
        raise InvalidInput("cinder_group needs Cinder: this Cairn has none configured "
                           "(CAIRN_CINDER)", field="cinder_group")
    return ownership.caller_group(volumes_from.cinder, ctx, group_id)


def joining(session: Session, volumes_from: VolumeResolver, group: CinderGroup,
             project_id: str) -> list[Volume]:
    """The group's volumes of the plan's project (`group_members`); a group with
    none is refused."""
    assert volumes_from.cinder is not None, "caller_group found the group"
    out = group_members(session, volumes_from.cinder, group, project_id).joining
    if not out:
        raise InvalidInput(f"Cinder group {group.id} has no volumes of this project: add "
                           "volumes to it in Cinder first", field="cinder_group")
    return out
