"""Database access, one `Database` per process (never at import time: an engine must not
cross Celery's fork)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, create_engine, event, func, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session, sessionmaker

from services.base import utcnow

log = logging.getLogger(__name__)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # API, worker and scheduler share the file: WAL lets readers run beside the writer and
    # busy_timeout makes a writer wait for the lock instead of failing at once.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def make_engine(url: str, pool_size: int = 10) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    # Connections beyond pool_size are closed when given back: a process that regularly
    # needs more than pool_size at once pays a new PostgreSQL backend (a fork and an
    # authentication, ~1 ms of CPU each side) per use.
    return create_engine(url, pool_pre_ping=True, pool_size=pool_size, max_overflow=20)


class _ReadOnlySession(Session):
    def flush(self, objects: Any = None) -> None:
        if self.new or self.dirty or self.deleted:
            raise RuntimeError("a read-only unit of work was asked to write")


_UNDO = "cairn_undo"


def undo_on_rollback(session: Session, step: Callable[[], None], what: str) -> None:
    """Run `step` if this unit of work rolls back (its commit failing included)."""
    session.info.setdefault(_UNDO, []).append((what, step))


def _undo(session: Session) -> None:
    for what, step in reversed(session.info.pop(_UNDO, [])):
        try:
            step()
        except Exception:
            log.exception("could not undo %s after a rolled back request; remove it by hand",
                          what)


def lock_row(session: Session, key: InstrumentedAttribute[Any], value: str) -> None:
    """Hold the row whose `key` column is `value` locked until the unit of work ends; call
    it before reading what the lock guards. PostgreSQL: SELECT ... FOR UPDATE. SQLite has no
    row locks: a write to the row takes the database's write lock (waiting busy_timeout for
    it), and it must come before the unit's reads, for a unit that read first and writes
    after another writer committed is refused at once in WAL mode (SQLITE_BUSY_SNAPSHOT),
    not made to wait. Nothing is locked when no such row exists. (FOR NO KEY UPDATE: rows
    that reference the locked one by foreign key may still be written meanwhile.)"""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(key).where(key == value).with_for_update(key_share=True))
    else:
        session.execute(update(key.class_).where(key == value).values({key: key}))


def database_now(session: Session) -> datetime:
    """Now by the database's clock, which every process shares: a claim one worker takes
    and another compares against must not depend on whose clock runs fast. (SQLite runs
    inside the processes, on their host: its clock is theirs.)"""
    if session.get_bind().dialect.name != "postgresql":
        return utcnow()
    found = session.scalar(select(func.clock_timestamp()))
    assert isinstance(found, datetime)
    return found.astimezone(UTC)


class Database:
    def __init__(self, url: str, pool_size: int = 10) -> None:
        self.engine = make_engine(url, pool_size)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: commits when the block ends, rolls back when it raises. What the
        work did outside the database (a Cinder volume made for a restore) is undone by the
        steps registered with `undo_on_rollback` when it rolls back, commit included."""
        with self.sessions() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                _undo(session)
                raise
            session.info.pop(_UNDO, None)

    @contextmanager
    def reading(self) -> Iterator[Session]:
        """A read-only unit of work in autocommit mode: each statement sees the latest
        committed data, and no BEGIN or COMMIT round trip is paid. For list pages, whose
        queries are each consistent on their own. Anything to write raises at the flush."""
        with (self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn,
              _ReadOnlySession(bind=conn, autoflush=False) as session):
            yield session

    def dispose(self) -> None:
        self.engine.dispose()
