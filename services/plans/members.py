"""Which volumes of a Cinder group join the plan that follows it, asked with the caller's
token (a request) or Cairn's service user (the scheduler's sync): the group's volumes of the
plan's own project. Cinder lets a project's admin put another project's volume in a group;
such a member stays out, as one deleted since Cinder listed the group does."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from services.errors import VolumeNotFound
from services.openstack.cinder import CinderApi, CinderGateway
from services.records.volumes import Volume
from services.volumes import repository as volumes

log = logging.getLogger(__name__)


def group_member(session: Session, gateway: CinderGateway, api: CinderApi, project_id: str,
                 group_id: str, volume_id: str, *,
                 token_project: str | None = None) -> Volume | None:
    """The Volume row of a member of group `group_id` for a plan of `project_id`, or None
    when it may not join. Cinder names a volume's project to administrators only; to
    anyone else it shows nothing but its token's own project's (`token_project`: the
    caller's for a request; Cairn's service user's is never a plan's)."""
    try:
        found = api.get(volume_id)
    except VolumeNotFound:
        return None  # deleted since Cinder listed the group, or not the token's to see
    owner = found.project_id or token_project
    if owner != project_id:
        log.warning("Cinder group %s lists volume %s of project %s; the plan is project "
                    "%s's and leaves it out", group_id, volume_id, owner, project_id)
        return None
    return volumes.get_or_create(session, project_id, gateway.image_ref(found.id),
                                 cinder_volume_id=found.id)
