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

from services.openstack.cinder import CinderGroup
from services.openstack.cinder_gateway import CinderGateway
from services.records.volumes import Volume
from services.volumes import repository as volumes


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
