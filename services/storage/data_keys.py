"""An object target's data key (the target's key wrapped by the operator's key,
`object_keys.py`): made exactly once, recorded in Cairn's database, which is its authority,
and kept in the bucket (`keys/data-key`), which must hold the same key.

The database decides (`key_records.py`): the first backup or copy of a new target inserts
the key's record, and every racing one finds that record and seals with its key. Only then
is the bucket's copy written, from the record, with `If-None-Match: *`: every writer writes
the same bytes, so even a store that ignores the condition (it replaces an object written
a moment before) replaces the key only with itself. Before the database recorded the key, a
worker that found no key and stalled wrote its own key after another worker's restore point
was available, and that restore point could no longer be read (the review of issue 31).

The bucket keeps its copy because a bucket must be readable without Cairn's database
(disaster recovery: the operator's key and the bucket are enough). Every job that opens
the store compares the bucket's key with the record and refuses, writing nothing, when
they differ (TargetKeyChanged: replaced by hand, by the bucket's holder, or by a worker of
an older Cairn that still raced), and a backup compares them again just before its restore
point becomes available (`check`). The record keeps the wrapped key too: the copy an
operator puts back.

Never beside data: chunks or manifests under the prefix with no key there mean the key was
lost; and a bucket that once held the recorded key and holds none now is not where the
target's data is (pointed at another prefix) or lost it. In both, a new key would read
nothing stored, and nothing is written (TargetKeyMissing) until the operator acts.

A target whose bucket holds a key and has no record (made before the database recorded
keys, or a database restored from a dump older than the target) gets that key recorded
the first time a job opens it: adopted once, by the same insert.

"The bucket" here is wherever the target keeps its blobs, a `ChunkBackend`: an S3 bucket
under a prefix, or a directory target's path. The messages name it in its kind's word
(`ChunkBackend.where`), or say "the target"."""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass

from services.db import Database
from services.errors import (
    DataCorrupt,
    StorageUnavailable,
    TargetKeyChanged,
    TargetKeyMissing,
    TargetKeyUnavailable,
    TargetNeverWritten,
)
from services.records.object_target_keys import ObjectTargetKey
from services.storage import key_records
from services.storage.chunk_backend import ChunkBackend
from services.storage.object_keys import (
    TargetKeys,
    fingerprint,
    new_data_key,
    unwrap_data_key,
    wrap_data_key,
)
from services.storage.object_layout import CHUNKS, DATA_KEY, MANIFESTS

log = logging.getLogger(__name__)

WRAPPED_LIMIT = 1024
"""The most a data key object is read for: a wrapped key is 68 bytes."""
GUIDE = 'docs/operations.md, "Object targets: the data key"'


@dataclass(frozen=True)
class DataKey:
    """A target's data key as a job holds it."""

    wrapped: bytes
    """As the bucket held it when the job opened the store."""
    keys: TargetKeys
    fingerprint: str


def read(bucket: ChunkBackend, target: str) -> bytes | None:
    """The stored wrapped key, None when there is none."""
    try:
        blob = bucket.get(DATA_KEY, limit=WRAPPED_LIMIT)
    except DataCorrupt as exc:
        raise TargetKeyUnavailable(f"the data key object of target {target!r} is not a Cairn "
                                   f"data key: {exc.message}") from None
    return None if blob is None else bytes(blob)


def _configured(target: str, operator_key: bytes | None) -> bytes:
    if operator_key is None:
        raise TargetKeyUnavailable(
            f"target {target!r} is encrypted and no operator key is configured: "
            "nothing on it can be read or written")
    return operator_key


def unwrapped(target: str, operator_key: bytes | None, wrapped: bytes) -> DataKey:
    data_key = unwrap_data_key(_configured(target, operator_key), target, wrapped)
    return DataKey(wrapped, TargetKeys.from_data_key(target, data_key), fingerprint(data_key))


def data_without_key(bucket: ChunkBackend) -> str | None:
    """What the target holds although its data key is gone (`manifests`, `chunks`), None
    when it holds a key or nothing at all. For reports: nothing is refused here. Assumes
    the store lists what was written before (list-after-write consistency: RGW, AWS S3
    and MinIO give it)."""
    if bucket.size(DATA_KEY) is not None:
        return None
    held = [what for what, prefix in (("manifests", MANIFESTS), ("chunks", CHUNKS))
            if bucket.holds_any(prefix)]
    if not held or bucket.size(DATA_KEY) is not None:  # made meanwhile by a first backup
        return None
    return " and ".join(held)


def _export_hint(target: str, where: str) -> str:
    return (f"Cairn's database keeps a copy: `cairn-manage object-key export {target} --out "
            f"{target}.data-key`, then copy that file to {DATA_KEY} in the target's {where} "
            f"({GUIDE})")


def missing(bucket: ChunkBackend, target: str, held: str) -> TargetKeyMissing:
    return TargetKeyMissing(
        f"target {target!r} holds {held} but no data key ({DATA_KEY} in its {bucket.where}): "
        "nothing on it can be read, and a new key could not read what is there, so Cairn "
        "writes nothing to it. Put back the key object from your copy of it, or point the "
        f"target at the {bucket.where} it was made with. "
        + _export_hint(target, bucket.where), target=target)


def _gone_from_bucket(bucket: ChunkBackend, target: str,
                      record: ObjectTargetKey) -> TargetKeyMissing:
    assert record.stored_at is not None
    return TargetKeyMissing(
        f"target {target!r}'s {bucket.where} holds no data key ({DATA_KEY}), though its "
        f"key was stored there on {record.stored_at:%Y-%m-%d %H:%M} UTC: the target points "
        f"at another {bucket.where} than the one holding its data, or the key object was "
        "removed. Cairn writes nothing there until you point the target back, or put the "
        "key back. " + _export_hint(target, bucket.where), target=target)


def _not_the_recorded(bucket: ChunkBackend, target: str, record: ObjectTargetKey,
                      found: str) -> TargetKeyChanged:
    return TargetKeyChanged(
        f"the data key in target {target!r}'s {bucket.where} ({DATA_KEY}, fingerprint "
        f"{found}) is not the one Cairn's database records for it (fingerprint "
        f"{record.fingerprint}, {record.origin} on {record.created_at:%Y-%m-%d %H:%M} UTC): "
        f"it was replaced (by hand, by whoever holds the {bucket.where}, or by a worker of "
        "a Cairn older than the "
        "database's record that raced to make it). What Cairn stored under the recorded "
        "key cannot be read with it, so nothing is read or written there until the recorded "
        "key is back. Keep a copy of the key object found there, then put the recorded one "
        "back. " + _export_hint(target, bucket.where), target=target)


def opened(db: Database, bucket: ChunkBackend, target: str, operator_key: bytes | None, *,
           create: bool = False) -> DataKey:
    """The target's data key, as its database record and its bucket both hold it. A target
    with neither gets one when `create` (its first backup or copy) and it holds no data:
    made exactly once, whoever else makes it at the same moment. Refused: TargetKeyChanged
    when the bucket holds another key than the record; TargetKeyMissing when the bucket
    holds no key beside data, or none where the recorded key was stored;
    TargetNeverWritten for a target never written without `create`;
    TargetKeyUnavailable without the operator's key or with another one."""
    _configured(target, operator_key)
    record = key_records.get(db, target)
    if record is None:
        record = _first_record(db, bucket, target, operator_key, create=create)
    stored = read(bucket, target)
    if stored is None:
        stored = _store_recorded(bucket, target, record, create=create)
    key = _bucket_key(bucket, target, operator_key, stored, record)
    if not hmac.compare_digest(key.fingerprint, record.fingerprint):
        raise _not_the_recorded(bucket, target, record, key.fingerprint)
    if stored != record.wrapped:
        key_records.follow_rewrap(db, target, record.fingerprint, stored)
    if record.stored_at is None:
        key_records.mark_stored(db, target)
    return key


def _bucket_key(bucket: ChunkBackend, target: str, operator_key: bytes | None, stored: bytes,
                record: ObjectTargetKey) -> DataKey:
    """The bucket's key unwrapped. One that does not open while the record's copy does was
    replaced (by something that does not hold the operator's key), not opened with the
    wrong operator's key: TargetKeyChanged, not TargetKeyUnavailable."""
    try:
        return unwrapped(target, operator_key, stored)
    except TargetKeyUnavailable as refused:
        if stored == record.wrapped or not _opens(target, operator_key, record.wrapped):
            raise refused from None  # the operator's key is not the target's: say that
        raise _not_the_recorded(bucket, target, record, "none: it does not open with the "
                                "operator's key") from None


def _opens(target: str, operator_key: bytes | None, wrapped: bytes) -> bool:
    try:
        unwrapped(target, operator_key, wrapped)
    except TargetKeyUnavailable:
        return False
    return True


def _first_record(db: Database, bucket: ChunkBackend, target: str, operator_key: bytes | None, *,
                  create: bool) -> ObjectTargetKey:
    """The record of a target that has none: the bucket's key adopted, or a new one made
    (when `create` and the bucket holds nothing); whoever inserts first wins."""
    stored = read(bucket, target)
    if stored is not None:
        found = unwrapped(target, operator_key, stored)  # another operator's key: refused
        return key_records.insert_once(db, target, stored, found.fingerprint,
                                       key_records.ADOPTED)
    held = data_without_key(bucket)
    if held is not None:
        raise missing(bucket, target, held)
    if not create:
        raise TargetNeverWritten(
            f"target {target!r} holds no data key: it has never been written to, or the "
            f"{bucket.where} is not the one it was made with", target=target)
    made = unwrapped(target, operator_key, wrap_data_key(_configured(target, operator_key),
                                                         target, new_data_key()))
    return key_records.insert_once(db, target, made.wrapped, made.fingerprint,
                                   key_records.MADE)


def _store_recorded(bucket: ChunkBackend, target: str, record: ObjectTargetKey, *,
                    create: bool) -> bytes:
    """The bucket, which holds no key, gets the recorded one: the bytes of the record,
    whoever writes them, and never where the key was stored once already or beside data."""
    held = data_without_key(bucket)
    if held is not None:
        raise missing(bucket, target, held)
    if record.stored_at is not None:
        raise _gone_from_bucket(bucket, target, record)
    if not create:
        raise TargetNeverWritten(
            f"target {target!r} holds no data key yet: its first backup has not stored it",
            target=target)
    wrote = bucket.put_new(DATA_KEY, record.wrapped)
    stored = read(bucket, target)
    if stored is None:
        raise StorageUnavailable(
            f"target {target!r}'s data key, just written by this worker, cannot be read "
            "back: the store does not give read-after-write consistency; run the job again"
            if wrote else
            f"another writer was storing target {target!r}'s data key at the same moment "
            "and the store does not show it yet; run the job again")
    if wrote:
        log.info("target %s: stored its data key in its %s", target, bucket.where)
    return stored


def check(db: Database, bucket: ChunkBackend, target: str, key: DataKey,
          operator_key: bytes | None) -> None:
    """Raises TargetKeyChanged unless the key `key` (what a job sealed with) is still the
    one Cairn's database records and the one the bucket holds: asked just before what the
    job sealed becomes available. The same key wrapped anew (a rotation of the operator's
    key) is the same key; `operator_key` is the one configured now."""
    record = key_records.get(db, target)
    if record is None or not hmac.compare_digest(record.fingerprint, key.fingerprint):
        raise TargetKeyChanged(
            f"Cairn's database no longer records the data key this job sealed with as "
            f"target {target!r}'s (its record was removed or replaced while the job ran): "
            "what it wrote is not kept. Run the job again", target=target)
    stored = read(bucket, target)
    if stored is None:
        raise TargetKeyChanged(
            f"the data key of target {target!r} was removed from its {bucket.where} while "
            f"this job ran: what it wrote could not be read back from the {bucket.where} "
            "alone, so it is not kept. Put the key back and run the job again. "
            + _export_hint(target, bucket.where), target=target)
    if stored in (key.wrapped, record.wrapped):
        return
    if not _opens(target, operator_key, stored) or not hmac.compare_digest(
            unwrapped(target, operator_key, stored).fingerprint, key.fingerprint):
        raise TargetKeyChanged(
            f"the data key in target {target!r}'s {bucket.where} is not the one this job "
            "sealed with (it was replaced while the job ran): what it wrote could not be read "
            f"back from the {bucket.where} alone, so it is not kept. Put the recorded key "
            "back and run the job again. " + _export_hint(target, bucket.where),
            target=target)


def check_sealed_with(target: str, key: DataKey, restore_point_id: str,
                      sealed_with: str | None) -> None:
    """Raises TargetKeyChanged when the restore point records the key it was sealed with
    and that is not the target's key now: what it holds cannot be read with this key, and
    is not corrupt for it. (None: made before fingerprints were recorded; its manifest's
    tag is then the only check.)"""
    if sealed_with is None or hmac.compare_digest(sealed_with, key.fingerprint):
        return
    raise TargetKeyChanged(
        f"restore point {restore_point_id} was sealed with the data key of fingerprint "
        f"{sealed_with}, and target {target!r}'s data key is now the one of fingerprint "
        f"{key.fingerprint} (the key was replaced on the target and in Cairn's database): it "
        "cannot be read with this key, and is not corrupt. Put the key it was sealed with "
        f"back ({GUIDE})", target=target, restore_point_id=restore_point_id)


def problem(db: Database, bucket: ChunkBackend, target: str) -> str | None:
    """What is wrong with the target's key as seen without the operator's key (for the
    scheduler's probe and the orphan report), None when nothing is: data without a key, no
    key where the recorded one was stored, or a key object other than the recorded one
    (until a worker has opened a key wrapped anew, that too)."""
    held = data_without_key(bucket)
    if held is not None:
        return f"holds {held} but no data key"
    record = key_records.get(db, target)
    if record is None:
        return None
    stored = read(bucket, target)
    if stored is None:
        return (f"holds no data key, though its key was stored there on "
                f"{record.stored_at:%Y-%m-%d %H:%M} UTC (pointed at another "
                f"{bucket.where}?)") if record.stored_at is not None else None
    if stored != record.wrapped:
        return ("holds a data key object other than the one Cairn's database records "
                "(replaced?)")
    return None
