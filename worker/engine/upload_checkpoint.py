"""An upload's checkpoint on an object target: how far its chunks are confirmed stored, so
that a retry after a crash does not look them up again (one HEAD each, a round trip to a
store that may be far away: 2.6 M of them for 10 TiB at 4 MiB chunks).

It is one small object per restore point, `checkpoints/<project>/<restore point>`, sealed
with the target's key and bound to its name like a manifest, rewritten at each progress
write: the size of a few fields whatever the volume's size. It holds a mark, not names:
every chunk the upload's plan reads below the mark index was all zeros, was named by the
base, or was confirmed stored (found by a lookup, or sent). A retry reads the same source
snapshot (the plan names its snap id), so it names each of those chunks as the killed
attempt did, and trusts them without asking the store, provided that:

- the plan is the same: the same snapshot, base, chunk size, size and key (another base
  would have the retry read chunks the killed attempt took from its base unread);
- no sweep of the target can have run since: the checkpoint records the target's sweep
  count (`target_leases.sweeps`) read under the killed attempt's shared lease, before its
  first lookup, and the retry reads it again under its own. A garbage collection sweeps
  only under the exclusive lease, whose every acquisition counts one more, so an equal
  count means no chunk the killed attempt confirmed was deleted since (a chunk found in
  the store may have been named by no manifest: a sweep would have taken it).

Anything else (another plan, another count, a damaged or unreadable checkpoint) makes the
retry look every chunk up, as it did before checkpoints existed: it costs time, never
correctness."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass

from services.errors import DataCorrupt
from services.storage.chunk_backend import ChunkBackend
from services.storage.object_layout import checkpoint_key
from worker.engine.chunk_store import ChunkStore

log = logging.getLogger(__name__)

LIMIT = 4096
"""Bytes a checkpoint can hold, sealed: what is read of one at most."""


@dataclass(frozen=True)
class UploadCheckpoint:
    plan: str
    """What the upload was: its source snapshot, base, chunk size, image size and key."""
    sweeps: int
    """The target's sweep count when the attempt that confirmed the chunks took its lease."""
    confirmed_below: int
    """Every chunk of the plan below this index is all zeros, known or confirmed stored."""


def plan_of(origin: str, *, base: str | None, since: str | None, chunk_size: int,
            image_size: int, key_fingerprint: str) -> str:
    """`origin`: what identifies the snapshot read, for good (its snap id: a snapshot taken
    again under the same name is another one)."""
    return json.dumps([origin, base, since, chunk_size, image_size, key_fingerprint])


def save(store: ChunkStore, project_id: str, restore_point_id: str,
         checkpoint: UploadCheckpoint) -> None:
    key = checkpoint_key(project_id, restore_point_id)
    store.backend.put(key, store.codec().seal(b"checkpoint", key,
                                              json.dumps(asdict(checkpoint)).encode()))


def load(store: ChunkStore, project_id: str, restore_point_id: str, *, plan: str,
         sweeps: int) -> int:
    """The index below which the chunks of `plan` are confirmed stored and no sweep can
    have removed them since (0 when none is: no checkpoint, another plan, a sweep since, a
    damaged checkpoint)."""
    key = checkpoint_key(project_id, restore_point_id)
    try:
        blob = store.backend.get(key, limit=LIMIT)
        if blob is None:
            return 0
        found = UploadCheckpoint(**json.loads(store.codec().open(b"checkpoint", key, blob)))
        if not all(isinstance(v, int) and not isinstance(v, bool)
                   for v in (found.sweeps, found.confirmed_below)):
            raise ValueError("its figures are not integers")
    except (DataCorrupt, ValueError, TypeError) as exc:
        log.warning("checkpoint %s is unusable (%s); every chunk is looked up again", key,
                    exc.message if isinstance(exc, DataCorrupt) else exc)
        return 0
    if found.plan != plan:
        log.info("checkpoint %s is of another plan; every chunk is looked up again", key)
        return 0
    if found.sweeps != sweeps:
        log.info("target %s was swept since checkpoint %s was saved; every chunk is looked "
                 "up again", store.target, key)
        return 0
    return max(0, found.confirmed_below)


def remove(backend: ChunkBackend, project_id: str, restore_point_id: str) -> None:
    """No key needed: a failed backup is undone on a target whose key is lost as on any
    other."""
    backend.delete(checkpoint_key(project_id, restore_point_id))
