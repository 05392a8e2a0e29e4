"""What a volume's restore points hold on an RBD target (`services/quotas/chains.Measure`):
read from the backup image's object maps (fast-diff), as `rbd du` reads them. Each restore
point is a snapshot of the image; a restore point being committed is measured on the head,
which its snapshot is about to freeze."""

from __future__ import annotations

from collections.abc import Sequence

from services import targets
from services.errors import NotFound
from services.quotas.chains import Point
from services.records.restore_points import backup_image_name, snapshot_name
from services.storage import rbd_images
from worker.runtime import Runtime


class RbdHeld:
    def __init__(self, rt: Runtime, target: str, volume_id: str, *,
                 head_of: str | None = None) -> None:
        """`head_of`: a restore point whose snapshot may not be taken yet (its commit is
        being checked): measured on the head."""
        self.rt, self.volume_id, self.head_of = rt, volume_id, head_of
        self.pool = targets.snapshotted(rt.settings, target)
        self._known: dict[tuple[str | None, str], int] = {}

    def present(self, points: Sequence[Point]) -> set[str]:
        with self.rt.clusters.ioctx(self.pool.cluster, self.pool.pool) as io:
            try:
                with rbd_images.open_image(io, backup_image_name(self.volume_id),
                                           read_only=True) as image:
                    names = set(rbd_images.snapshot_names(image))
            except NotFound:
                return set()
        return {p.id for p in points if snapshot_name(p.id) in names}

    def beyond(self, previous: Point | None, point: Point) -> int:
        key = (previous.id if previous else None, point.id)
        if key not in self._known:
            self._known[key] = self._measure(previous, point)
        return self._known[key]

    def _measure(self, previous: Point | None, point: Point) -> int:
        since = snapshot_name(previous.id) if previous is not None else None
        name = backup_image_name(self.volume_id)
        with self.rt.clusters.ioctx(self.pool.cluster, self.pool.pool) as io:
            if point.id == self.head_of:
                with rbd_images.open_image(io, name, read_only=True) as image:
                    if snapshot_name(point.id) not in rbd_images.snapshot_names(image):
                        return rbd_images.held_beyond(image, since)
            with rbd_images.open_image(io, name, snapshot=snapshot_name(point.id),
                                       read_only=True) as image:
                return rbd_images.held_beyond(image, since)
