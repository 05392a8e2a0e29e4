"""The volumes of an OpenStack cloud: Cinder's, asked with the caller's token, newest first.
Only the project's own: Cinder shows a project's admin other projects' volumes too
(`ownership.foreign`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.context import RequestContext
from services.errors import InvalidInput, VolumeNotFound
from services.openstack.cinder import CinderVolume
from services.openstack.cinder_gateway import CinderGateway
from services.records.volumes import Volume
from services.volumes.ownership import caller_volume, foreign
from services.volumes.source import SourcePage, SourceVolume

GiB = 1 << 30


def _of(volume: CinderVolume) -> SourceVolume:
    return SourceVolume(id=volume.id, name=volume.name, size_bytes=volume.size_gb * GiB,
                        status=volume.status, attached_to=volume.attached_to,
                        volume_type=volume.volume_type, kind="cinder")


@dataclass(frozen=True)
class CinderVolumes:
    cinder: CinderGateway

    def page(self, ctx: RequestContext, *, limit: int, marker: str | None,
             name: str | None = None) -> SourcePage:
        page, next_marker = self.cinder.for_user(ctx).list_page(limit=limit, marker=marker,
                                                                name=name)
        return SourcePage([_of(v) for v in page if not foreign(v.project_id, ctx)],
                          page[-1].id if page else None, next_marker)

    def one(self, ctx: RequestContext, volume_id: str) -> SourceVolume:
        return _of(caller_volume(self.cinder, ctx, volume_id))

    def check_marker(self, ctx: RequestContext, marker: str) -> str:
        """A marker names a volume of the caller's project, or none. Cinder looks the marker
        up for the token's roles: for a project's admin, another project's volume would
        start a page (200) where a missing id is refused (422), telling them which ids
        exist."""
        try:
            return caller_volume(self.cinder, ctx, marker).id
        except VolumeNotFound:
            raise InvalidInput(f"marker {marker.lower()}: no volume of your project has this "
                               "id; pass the next_marker of the previous page",
                               field="marker") from None

    def registered(self, session: Session, ctx: RequestContext,
                   ids: list[str]) -> dict[str, str]:
        return {cinder_id: volume_id for volume_id, cinder_id in session.execute(
            select(Volume.id, Volume.cinder_volume_id).where(
                Volume.project_id == ctx.project_id, Volume.cinder_volume_id.in_(ids)))
            if cinder_id is not None}
