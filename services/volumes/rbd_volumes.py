"""The volumes of a Cairn without Cinder (the local stack's `make up`, a Ceph cluster with
no OpenStack in front): the RBD images of the pools the operator names in
CAIRN_VOLUME_POOLS, each by its `cluster/pool/image`, in that order. Naming RBD images is
what such a Cairn's callers do anyway (`resolve.py`), with the same rule: under Keystone,
only the cloud's administrator may; Cairn's own images (`cairn.*`) are no one's."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.context import RequestContext
from services.errors import Forbidden, InvalidInput, VolumeNotFound
from services.records.volumes import Volume
from services.storage import rbd_images
from services.storage.ceph import CephClusters
from services.storage.refs import RESERVED_PREFIXES, ImageRef, parse_image_ref
from services.volumes.source import SourcePage, SourceVolume


@dataclass(frozen=True)
class RbdVolumes:
    clusters: CephClusters
    pools: dict[str, list[str]]
    """Cluster -> its pools whose images are volumes (settings.volume_pools)."""

    def page(self, ctx: RequestContext, *, limit: int, marker: str | None,
             name: str | None = None) -> SourcePage:
        # An image's name is its name here: `name` finds the images called so in any pool.
        refs = [r for r in self._refs(ctx) if (marker is None or str(r) > marker)
                and (name is None or r.image == name)][:limit + 1]
        shown = refs[:limit]
        volumes = [v for v in (self._volume(r) for r in shown) if v is not None]
        return SourcePage(volumes, str(shown[-1]) if shown else None,
                          str(shown[-1]) if len(refs) > limit else None)

    def one(self, ctx: RequestContext, volume_id: str) -> SourceVolume:
        self._may_list(ctx)
        ref = parse_image_ref(volume_id, field="volume_id")
        found = self._volume(ref) if self._listed(ref) else None
        if found is None:
            raise VolumeNotFound(f"volume {volume_id!r} not found: no RBD image "
                                 f"{ref.image!r} in the volume pools (CAIRN_VOLUME_POOLS)",
                                 volume=volume_id)
        return found

    def check_marker(self, ctx: RequestContext, marker: str) -> str:
        ref = parse_image_ref(marker, field="marker")
        if ref.pool not in self.pools.get(ref.cluster, []):
            raise InvalidInput(f"marker {marker!r} is not an image of the volume pools; pass "
                               "the next_marker of the previous page", field="marker")
        return str(ref)

    def registered(self, session: Session, ctx: RequestContext,
                   ids: list[str]) -> dict[str, str]:
        wanted = set(ids)
        images = {i.rsplit("/", 1)[-1] for i in ids}
        rows = session.execute(select(Volume.id, Volume.cluster, Volume.pool, Volume.image)
                               .where(Volume.project_id == ctx.project_id,
                                      Volume.image.in_(images)))
        return {ref: row_id for row_id, cluster, pool, image in rows
                if (ref := f"{cluster}/{pool}/{image}") in wanted}

    def _may_list(self, ctx: RequestContext) -> None:
        if not self.pools:
            raise InvalidInput("this Cairn has neither Cinder (CAIRN_CINDER) nor volume pools "
                               "(CAIRN_VOLUME_POOLS) configured: it protects RBD images "
                               "named as cluster/pool/image")
        if ctx.token is not None and not ctx.is_admin:
            raise Forbidden("this Cairn has no Cinder configured (CAIRN_CINDER): its volumes "
                            "are RBD images, which only administrators may name")

    def _listed(self, ref: ImageRef) -> bool:
        return ref.pool in self.pools.get(ref.cluster, []) \
            and not ref.image.startswith(RESERVED_PREFIXES)

    def _refs(self, ctx: RequestContext) -> list[ImageRef]:
        self._may_list(ctx)
        refs = []
        for cluster, pools in self.pools.items():
            for pool in pools:
                with self.clusters.ioctx(cluster, pool) as ioctx:
                    names = rbd_images.image_names(ioctx)
                for name in names:
                    try:
                        ref = parse_image_ref(f"{cluster}/{pool}/{name}", field="volume")
                    except InvalidInput:
                        continue  # a name Cairn could not show and take back
                    if self._listed(ref):
                        refs.append(ref)
        return sorted(refs, key=str)

    def _volume(self, ref: ImageRef) -> SourceVolume | None:
        with self.clusters.ioctx(ref.cluster, ref.pool) as ioctx:
            size = rbd_images.image_size(ioctx, ref.image)
        if size is None:
            return None
        return SourceVolume(id=str(ref), name=ref.image, size_bytes=size, status="available",
                            attached_to=(), volume_type=None, kind="rbd_image")
