"""The database's side of object targets' data keys (the database is the truth): each
target's record of its key (`ObjectTargetKey`), inserted exactly once, and the fingerprint
of the key each restore point was sealed with.

Exactly once: racing first backups each try to insert their key's record; the primary key
refuses all but the first (on SQLite and PostgreSQL alike), and each of the others reads
the record that won and seals with that key. The bucket's own copy of the key is written
from the record, so every writer writes the same bytes: a store that ignores the condition
of that write can overwrite the key only with itself (`data_keys.py`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from services.base import utcnow
from services.db import Database
from services.records.object_target_keys import ObjectTargetKey
from services.records.restore_points import RestorePoint
from services.status import RestorePointStatus

log = logging.getLogger(__name__)

MADE = "made"
ADOPTED = "adopted"
_STAMPED_AT_ONCE = 500
"""Restore points stamped per statement (an IN list every backend takes)."""


def get(db: Database, target: str) -> ObjectTargetKey | None:
    with db.session() as session:
        record = session.get(ObjectTargetKey, target)
        session.expunge_all()
    return record


def insert_once(db: Database, target: str, wrapped: bytes, fingerprint: str,
                origin: str) -> ObjectTargetKey:
    """The target's record: this one when it is the first, else the one inserted first
    (by another worker, a moment ago)."""
    try:
        with db.session() as session:
            session.add(ObjectTargetKey(target=target, fingerprint=fingerprint,
                                        wrapped=wrapped, origin=origin, created_at=utcnow()))
    except IntegrityError:
        log.info("object target %s: another worker recorded its data key first; using it",
                 target)
    else:
        log.info("object target %s: recorded its data key (%s, fingerprint %s)", target,
                 origin, fingerprint)
    record = get(db, target)
    assert record is not None  # never deleted by Cairn
    return record


def mark_stored(db: Database, target: str) -> None:
    """The bucket was seen holding the recorded key: from now on a bucket and prefix
    without it are not where the target's data is."""
    with db.session() as session:
        session.execute(update(ObjectTargetKey).where(
            ObjectTargetKey.target == target, ObjectTargetKey.stored_at.is_(None)
        ).values(stored_at=utcnow()))


def follow_rewrap(db: Database, target: str, fingerprint: str, wrapped: bytes) -> None:
    """The bucket holds the recorded key wrapped anew (under a new operator's key): the
    record's copy follows, so it opens with the operator's key in use."""
    with db.session() as session:
        session.execute(update(ObjectTargetKey).where(
            ObjectTargetKey.target == target, ObjectTargetKey.fingerprint == fingerprint
        ).values(wrapped=wrapped))
    log.info("object target %s: its data key was wrapped anew; the database's copy follows",
             target)


def stamp_restore_points(db: Database, target: str, restore_point_ids: Iterable[str],
                         fingerprint: str) -> None:
    """Restore points made before Cairn recorded fingerprints, whose manifests were just
    read with the key of `fingerprint` (their tags prove they were sealed with it), get
    it. Those that have one keep it."""
    ids = list(restore_point_ids)
    with db.session() as session:
        for start in range(0, len(ids), _STAMPED_AT_ONCE):
            session.execute(update(RestorePoint).where(
                RestorePoint.id.in_(ids[start:start + _STAMPED_AT_ONCE]),
                RestorePoint.target == target, RestorePoint.key_fingerprint.is_(None),
            ).values(key_fingerprint=fingerprint))


def other_fingerprints(db: Database, target: str, fingerprint: str) -> list[str]:
    """Fingerprints, other than `fingerprint`, of the keys the target's available restore
    points were sealed with."""
    with db.session() as session:
        found = session.scalars(select(RestorePoint.key_fingerprint).where(
            RestorePoint.target == target,
            RestorePoint.status == RestorePointStatus.AVAILABLE,
            RestorePoint.key_fingerprint.is_not(None),
            RestorePoint.key_fingerprint != fingerprint).distinct())
        return [f for f in found if f is not None]
