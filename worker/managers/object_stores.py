"""The object targets of one worker process: each target's bucket (an S3 client, whose
connection pool every job to that target shares) is made once; its data key is read anew
each time a job opens the store.

Why not the store with its keys, once per process: a key cached for the life of a process
outlives the key stored. Two first backups racing to make a target's key, or an operator
replacing or removing it, left a worker sealing with a key nobody could read once it
restarted, while its own verifies passed (issue 31). One small read per job opening the
store costs less than a restore point that cannot be restored; the key a job sealed with
is checked again before its restore point becomes available (`ChunkStore.check_key`)."""

from __future__ import annotations

import threading

from services.settings import Settings, object_target, operator_key
from services.storage.object_layout import manifest_key
from services.storage.s3 import Bucket
from worker.engine.chunk_store import ChunkStore

_lock = threading.Lock()
_buckets: dict[tuple[int, str], Bucket] = {}


def target_bucket(settings: Settings, target: str) -> Bucket:
    """The target's bucket, without its keys: for what needs none (removing a manifest)."""
    key = (id(settings), target)
    with _lock:
        bucket = _buckets.get(key)
        if bucket is None:
            bucket = _buckets[key] = Bucket(object_target(settings, target))
    return bucket


def open_store(settings: Settings, target: str, *, create: bool = False) -> ChunkStore:
    """The target's store with the data key stored now; with `create`, a target never
    written to gets its key, made exactly once (its first backup). Refused
    (TargetKeyUnavailable) without the operator's key or with another one than the target
    was made with; TargetKeyMissing when the target holds data but no key;
    TargetNeverWritten when it holds nothing and `create` is not given."""
    return ChunkStore.open(target_bucket(settings, target), target, operator_key(settings),
                           create=create)


def remove_manifest(settings: Settings, target: str, project_id: str,
                    restore_point_id: str) -> None:
    """The restore point's manifest goes (its chunks stay until a garbage collection finds
    no manifest naming them). No key is needed: a failed backup is undone, and a restore
    point deleted, on a target whose key is lost or was replaced as on any other."""
    target_bucket(settings, target).delete(manifest_key(project_id, restore_point_id))
