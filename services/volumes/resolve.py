"""What a user's `volume` names, as a registered Volume row: a Cinder volume id (the usual
way on an OpenStack cloud), or an RBD image `cluster/pool/image`.

With Keystone, the user's own token asks Cinder about the id, and another project's volume
is "not found", exactly like a missing one, also for a project's admin, whom Cinder shows
every project's volumes (`ownership.caller_volume`). Naming RBD images directly is then an
administrator's privilege: otherwise any project could protect (and so read) any image,
another project's Cinder volumes included; Cairn's own images (`cairn.*`) are no one's to
name."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from services.context import RequestContext
from services.errors import Forbidden, InvalidInput
from services.openstack.cinder_gateway import CinderGateway
from services.records.volumes import Volume
from services.storage import rbd_images
from services.storage.ceph import CephClusters
from services.storage.refs import parse_image_ref, require_unreserved
from services.volumes import repository as volumes
from services.volumes.ownership import caller_volume
from services.volumes.repository import CINDER_ID


@dataclass(frozen=True)
class VolumeResolver:
    clusters: CephClusters
    cinder: CinderGateway | None

    def resolve(self, session: Session, ctx: RequestContext, text: str, *,
                field: str) -> Volume:
        return resolve(session, ctx, self.clusters, self.cinder, text, field=field)


def resolve(session: Session, ctx: RequestContext, clusters: CephClusters,
            cinder: CinderGateway | None, text: str, *, field: str) -> Volume:
    """The Volume row, owned by the project that owns the volume: a Cinder volume's own
    project (an administrator backing up another project's volume makes that project's
    restore point), else the caller's (`ctx.project_id`, which `acting_for` sets). Nothing
    is registered for a volume the caller may not act on."""
    if CINDER_ID.match(text):
        if cinder is None:
            raise InvalidInput(
                f"{field} {text!r} is a Cinder volume id, but this Cairn has no Cinder "
                "configured (CAIRN_CINDER); name the RBD image as cluster/pool/image",
                field=field)
        found = caller_volume(cinder, ctx, text)
        assert found.project_id is not None, "caller_volume names the owner"
        return volumes.get_or_create(session, found.project_id, cinder.image_ref(found.id),
                                     cinder_volume_id=found.id, name=found.name or None)
    ref = parse_image_ref(text, field=field)
    if ctx.token is not None and not ctx.is_admin:
        raise Forbidden(f"{field} {text!r}: name a Cinder volume by its id; only "
                        "administrators may name RBD images directly", field=field)
    require_unreserved(ref, field=field)
    rbd_images.require_volume(clusters, ref, field=field)
    return volumes.get_or_create(session, ctx.project_id, ref)
