"""The data key object of an object target (`keys/data-key`: the target's data key wrapped
by the operator's key, `object_keys.py`): read with its size bounded, made exactly once, and
never made beside data.

Exactly once: the first backups of a new target race to make it, from several workers at
once. Each writes with `If-None-Match: *`, which the store checks atomically (Ceph RGW,
Debian's 16.2 included, refuses the second writer with 412; so do AWS S3 and MinIO): the
first key written stands, and every other writer reads it back and seals with it. Before
this, each writer put its own key and went on sealing with it; the last one stored won,
and every restore point the others made was unreadable once their workers restarted
(issue 31). A store that ignored the condition would still not make a restore point
unreadable: a backup checks, before its restore point becomes available, that the key it
sealed with is the one stored (`worker/managers/object_backup.py`).

Never beside data: chunks or manifests under the prefix with no key there mean the key was
lost (removed by hand, a partial copy of the bucket, a prefix that is not the one the
target was made with). A new key would read none of them, and the next collection would
find every manifest unreadable: refused with TargetKeyMissing until the operator acts."""

from __future__ import annotations

import logging

from services.errors import (
    DataCorrupt,
    StorageUnavailable,
    TargetKeyMissing,
    TargetKeyUnavailable,
    TargetNeverWritten,
)
from services.storage.object_keys import new_data_key, wrap_data_key
from services.storage.object_layout import CHUNKS, DATA_KEY, MANIFESTS
from services.storage.s3 import Bucket

log = logging.getLogger(__name__)

WRAPPED_LIMIT = 1024
"""The most a data key object is read for: a wrapped key is 68 bytes."""


def read(bucket: Bucket, target: str) -> bytes | None:
    """The stored wrapped key, None when there is none."""
    try:
        return bucket.get(DATA_KEY, limit=WRAPPED_LIMIT)
    except DataCorrupt as exc:
        raise TargetKeyUnavailable(f"the data key object of target {target!r} is not a Cairn "
                                   f"data key: {exc.message}") from None


def data_without_key(bucket: Bucket) -> str | None:
    """What the target holds although its data key is gone (`manifests`, `chunks`), None
    when it holds a key or nothing at all. For reports: nothing is refused here."""
    if bucket.size(DATA_KEY) is not None:
        return None
    held = [what for what, prefix in (("manifests", MANIFESTS), ("chunks", CHUNKS))
            if bucket.holds_any(prefix)]
    if not held or bucket.size(DATA_KEY) is not None:  # made meanwhile by a first backup
        return None
    return " and ".join(held)


def missing(target: str, held: str) -> TargetKeyMissing:
    return TargetKeyMissing(
        f"target {target!r} holds {held} but no data key ({DATA_KEY} under its prefix): "
        "nothing on it can be read, and a new key could not read what is there, so Cairn "
        "writes nothing to it. Put back the key object from your copy of it, or point the "
        "target at the bucket and prefix it was made with (docs/operations.md)",
        target=target)


def stored_or_made(bucket: Bucket, target: str, operator_key: bytes, *, create: bool) -> bytes:
    """The target's stored wrapped key. A target with none gets one when `create` (its
    first backup or copy) and it holds no data: made exactly once, whoever else makes it
    at the same moment. Refused: TargetKeyMissing beside data, TargetNeverWritten for an
    empty target without `create`."""
    wrapped = read(bucket, target)
    if wrapped is not None:
        return wrapped
    held = data_without_key(bucket)
    if held is not None:
        raise missing(target, held)
    if not create:
        raise TargetNeverWritten(
            f"target {target!r} holds no data key: it has never been written to, or the "
            "bucket or prefix is not the one it was made with", target=target)
    if bucket.put_new(DATA_KEY, wrap_data_key(operator_key, target, new_data_key())):
        log.info("object target %s: made its data key", target)
    else:
        log.info("object target %s: another writer made its data key first; using it", target)
    wrapped = read(bucket, target)
    if wrapped is None:
        raise StorageUnavailable(f"target {target!r} lost its data key just written")
    return wrapped
