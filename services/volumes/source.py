"""Where the volumes a project can protect come from: the seam between "which volumes are
there" and "how well is each protected" (`protection.py`). Cinder says it on an OpenStack
cloud (`cinder_volumes.py`); a Cairn without Cinder lists the RBD images of the pools the
operator names (`rbd_volumes.py`). The API picks one per request; nothing else asks which."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from sqlalchemy.orm import Session

from services.context import RequestContext

VolumeKind = Literal["cinder", "rbd_image"]
"""What a volume is, and so where it can be restored to: a Cinder volume (a new Cinder
volume, or over itself), or an RBD image (a new image)."""


@dataclass(frozen=True)
class SourceVolume:
    id: str
    """What the tenant names it by: a Cinder volume's id, or an RBD image's
    `cluster/pool/image`."""
    name: str
    size_bytes: int
    status: str
    attached_to: tuple[str, ...]
    volume_type: str | None
    kind: VolumeKind


@dataclass(frozen=True)
class SourcePage:
    volumes: list[SourceVolume]
    """The caller's volumes of the page read (a source may leave out some it read)."""
    last_read: str | None
    """The id of the last volume read, left out or not: where the next page starts."""
    next_marker: str | None
    """None on the last page."""


class VolumeSource(Protocol):
    def page(self, ctx: RequestContext, *, limit: int, marker: str | None,
             name: str | None = None) -> SourcePage:
        """Up to `limit` volumes read after `marker`, in the source's order."""

    def one(self, ctx: RequestContext, volume_id: str) -> SourceVolume:
        """The volume, or VolumeNotFound (also for one the caller may not see)."""

    def check_marker(self, ctx: RequestContext, marker: str) -> str:
        """`marker` as the source reads it, or InvalidInput when it names nothing of the
        caller's."""

    def registered(self, session: Session, ctx: RequestContext,
                   ids: list[str]) -> dict[str, str]:
        """Of `ids`, those Cairn has a Volume row for in the caller's project: id -> the
        row's id."""
