"""What a volume's restore points hold on an object target (`services/quotas/chains.Measure`):
the chunks their manifests name, each counted at its data's length before compression. A
restore point being committed is measured on its manifest before it is stored."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from services.errors import DataCorrupt, NotFound
from services.quotas.chains import Point
from services.storage.object_layout import manifest_key
from worker.engine.chunk_store import ChunkStore, ObjectManifest

log = logging.getLogger(__name__)


def chunk_lengths(manifest: ObjectManifest) -> dict[str, int]:
    """Each chunk the manifest names -> its data's length (a chunk's name is a keyed hash of
    its data, so one name is one length; the last chunk of an image may be short)."""
    size, step = manifest.image_size, manifest.chunk_size
    return {name: min(step, size - index * step) for index, name in manifest.chunks.items()}


class ObjectHeld:
    def __init__(self, store: ChunkStore, project_id: str, *,
                 unstored: dict[str, ObjectManifest] | None = None) -> None:
        """`unstored`: manifests of restore points being committed, not stored yet."""
        self.store, self.project_id = store, project_id
        self._chunks = {rp_id: chunk_lengths(m) for rp_id, m in (unstored or {}).items()}

    def present(self, points: Sequence[Point]) -> set[str]:
        return {p.id for p in points if p.id in self._chunks or self.store.backend.size(
            manifest_key(self.project_id, p.id)) is not None}

    def beyond(self, previous: Point | None, point: Point) -> int:
        mine = self._lengths(point)
        theirs = self._lengths(previous) if previous is not None else {}
        return sum(length for name, length in mine.items() if name not in theirs)

    def _lengths(self, point: Point) -> dict[str, int]:
        rp_id = point.id
        if rp_id not in self._chunks:
            try:
                self._chunks[rp_id] = chunk_lengths(
                    self.store.read_manifest(self.project_id, rp_id, point.size_bytes))
            except DataCorrupt as exc:
                if self.store.backend.size(manifest_key(self.project_id, rp_id)) is None:
                    raise NotFound(f"the manifest of restore point {rp_id} is gone") from None
                # Unreadable, so it names nothing we can tell: the restore point after it
                # counts all its chunks (never less than the target holds).
                log.warning("restore point %s: %s; counted as naming no chunk", rp_id,
                            exc.message)
                self._chunks[rp_id] = {}
        return self._chunks[rp_id]
