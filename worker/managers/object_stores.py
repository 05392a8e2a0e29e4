"""The chunk-format targets of one worker process (object stores, directories: any
`targets.ChunkTarget`): each target's backend (for an S3 bucket, a client whose connection
pool every job to that target shares) is made once; its data key is read anew, and checked
against the one Cairn's database records, each time a job opens the store.

Why not the store with its keys, once per process: a key cached for the life of a process
outlives the key stored. Two first backups racing to make a target's key, or an operator
replacing or removing it, left a worker sealing with a key nobody could read once it
restarted, while its own verifies passed (issue 31). One small read per job opening the
store costs less than a restore point that cannot be restored; the key a job sealed with
is checked again before its restore point becomes available (`ChunkStore.check_key`).

A restore point records the fingerprint of the key it was sealed with; every read of its
manifest here checks it first (`manifest_of`), so a key replaced since is reported as
such (`target_key_changed`), never as corruption."""

from __future__ import annotations

import threading

from services import targets
from services.db import Database
from services.records.restore_points import RestorePoint
from services.settings import Settings, operator_key
from services.storage import data_keys, key_records
from services.storage.chunk_backend import ChunkBackend
from services.storage.object_layout import manifest_key
from worker.engine.chunk_store import ChunkStore, ObjectManifest

_lock = threading.Lock()
_backends: dict[tuple[int, str], ChunkBackend] = {}


def target_backend(settings: Settings, target: str) -> ChunkBackend:
    """The target's backend, without its keys: for what needs none (removing a manifest)."""
    key = (id(settings), target)
    with _lock:
        backend = _backends.get(key)
        if backend is None:
            backend = _backends[key] = targets.chunked(settings, target).backend()
    return backend


def open_store(settings: Settings, db: Database, target: str, *,
               create: bool = False) -> ChunkStore:
    """The target's store with its data key as Cairn's database records it and the bucket
    holds it; with `create`, a target never written to gets its key, made exactly once
    (its first backup). Refused (TargetKeyUnavailable) without the operator's key or with
    another one than the target was made with; TargetKeyChanged when the bucket holds
    another key than the database records; TargetKeyMissing when the target holds data
    but no key, or no key where its key was stored; TargetNeverWritten when it holds
    nothing and `create` is not given."""
    return ChunkStore.open(db, target_backend(settings, target), target,
                           operator_key(settings), create=create)


def check_key(settings: Settings, store: ChunkStore) -> None:
    """`ChunkStore.check_key` with the operator's key configured now."""
    store.check_key(operator_key(settings))


def manifest_of(store: ChunkStore, rp: RestorePoint) -> ObjectManifest:
    """The restore point's manifest, read with the store's key. TargetKeyChanged, without
    reading it, when the restore point records that it was sealed with another key; a
    restore point that records none (made before fingerprints were) gets the store's once
    its manifest opened with it (the manifest's tag proves the key)."""
    data_keys.check_sealed_with(store.target, store.key, rp.id, rp.key_fingerprint)
    manifest = store.read_manifest(rp.project_id, rp.id, rp.size_bytes)
    if rp.key_fingerprint is None:
        key_records.stamp_restore_points(store.db, store.target, [rp.id], store.key.fingerprint)
    return manifest


def remove_manifest(settings: Settings, target: str, project_id: str,
                    restore_point_id: str) -> None:
    """The restore point's manifest goes (its chunks stay until a garbage collection finds
    no manifest naming them). No key is needed: a failed backup is undone, and a restore
    point deleted, on a target whose key is lost or was replaced as on any other."""
    target_backend(settings, target).delete(manifest_key(project_id, restore_point_id))
