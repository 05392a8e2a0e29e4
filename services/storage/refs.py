"""Names of RBD images as users write them: `cluster/pool/image`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.errors import InvalidInput

# Ceph allows more, but these are the names Cairn can show and type back safely.
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,254}$")


@dataclass(frozen=True)
class ImageRef:
    cluster: str
    pool: str
    image: str

    def __str__(self) -> str:
        return f"{self.cluster}/{self.pool}/{self.image}"


RESERVED_PREFIXES = ("cairn.", "cairn-instant-")
"""Names Cairn gives its own images and snapshots, each leading back to its row (docs/adr/
0005-ceph-names-lead-to-rows.md): snapshots `cairn.<restore-point-id>`, backup images
`cairn.vol.<volume-id>`, manifests and checkpoints, an instant restore's clone
`cairn-instant-<job-id>`. An image a caller names with one of them would be taken for
Cairn's (cleaned up as an orphan, adopted by another job, overwritten), so callers never
may, the cloud's administrator included."""


def require_unreserved(ref: ImageRef, *, field: str) -> ImageRef:
    """`ref`, unless its image has a name Cairn keeps for its own (InvalidInput)."""
    if ref.image.startswith(RESERVED_PREFIXES):
        raise InvalidInput(
            f"{field} {str(ref)!r}: names starting with "
            f"{' or '.join(repr(p) for p in RESERVED_PREFIXES)} are Cairn's own (its "
            "snapshots, backup images and clones); choose another name", field=field)
    return ref


def parse_image_ref(text: str, *, field: str, default_cluster: str | None = None,
                    default_pool: str | None = None) -> ImageRef:
    """Parse `cluster/pool/image`; with defaults given, `pool/image` and `image` too."""
    parts = text.split("/")
    if len(parts) == 1 and default_cluster and default_pool:
        parts = [default_cluster, default_pool, *parts]
    elif len(parts) == 2 and default_cluster:
        parts = [default_cluster, *parts]
    if len(parts) != 3 or not all(_PART.fullmatch(p) for p in parts):
        shape = ("cluster/pool/image" if default_cluster is None
                 else "image, pool/image or cluster/pool/image")
        raise InvalidInput(
            f"{field} {text!r} is not a valid RBD image name; expected {shape} "
            "(letters, digits, '.', '_' and '-')",
            field=field,
        )
    return ImageRef(*parts)
