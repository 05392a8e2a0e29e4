"""Where things live under an object target's prefix. Every name leads back to what owns
it: a manifest to its restore point's row, a chunk to its project (and the manifests that
name it), the data key to the target.

- `keys/data-key`: the target's data key, wrapped by the operator's key;
- `chunks/<project>/<name[:2]>/<name>`: a project's chunks, named by their keyed hash; the
  two-letter fan-out keeps listings and RGW's bucket index shards even;
- `manifests/<project>/<restore point>`: one sealed manifest per restore point;
- `checkpoints/<project>/<restore point>`: a backup's checkpoint while it is made, sealed
  (`worker/engine/upload_checkpoint.py`); removed once it is available, or by its undo."""

from __future__ import annotations

import re

DATA_KEY = "keys/data-key"
CHUNKS = "chunks/"
MANIFESTS = "manifests/"
CHECKPOINTS = "checkpoints/"
_MANIFEST = re.compile(r"^manifests/([^/]+)/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                       r"[0-9a-f]{12})$")


def chunk_key(project_id: str, name: str) -> str:
    return f"{CHUNKS}{project_id}/{name[:2]}/{name}"


def manifest_key(project_id: str, restore_point_id: str) -> str:
    return f"{MANIFESTS}{project_id}/{restore_point_id}"


def checkpoint_key(project_id: str, restore_point_id: str) -> str:
    return f"{CHECKPOINTS}{project_id}/{restore_point_id}"


def manifest_owner(key: str) -> tuple[str, str] | None:
    """(project, restore point id) of a manifest's key; None for a key Cairn does not name
    so (a project's id holds no control character; nothing follows the restore point's,
    not even a line feed)."""
    match = _MANIFEST.fullmatch(key)
    return (match.group(1), match.group(2)) if match and match.group(1).isprintable() \
        else None
