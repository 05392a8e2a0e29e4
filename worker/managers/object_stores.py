"""The object targets' chunk stores of one worker process, each opened once: a store holds
an S3 client (its connection pool is shared by every job to that target) and the target's
unwrapped keys."""

from __future__ import annotations

import threading

from services.settings import Settings, object_target, operator_key
from services.storage.s3 import Bucket
from worker.engine.chunk_store import ChunkStore

_lock = threading.Lock()
_stores: dict[tuple[int, str], ChunkStore] = {}


def open_store(settings: Settings, target: str, *, create: bool = False) -> ChunkStore:
    """The target's store; with `create`, a target never written to gets its data key (its
    first backup). Refused (TargetKeyUnavailable) without the operator's key or with another
    one than the target was made with."""
    key = (id(settings), target)
    with _lock:
        store = _stores.get(key)
    if store is not None:
        return store
    bucket = Bucket(object_target(settings, target))
    try:
        store = ChunkStore.open(bucket, target, operator_key(settings), create=create)
    except BaseException:
        bucket.close()
        raise
    with _lock:
        kept = _stores.setdefault(key, store)
    if kept is not store:
        bucket.close()
    return kept
