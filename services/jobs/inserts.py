"""Inserting job rows that a unique index may refuse (a slot another scheduler already took,
a prune already queued): the refused rows are dropped, never raised, in one statement on
either backend."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from services.base import Base
from services.records.jobs import Job


def insert_ignoring_conflicts(session: Session, rows: list[dict[str, Any]],
                              table: type[Base] = Job) -> None:
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    stmt: Insert
    if dialect == "postgresql":
        stmt = postgresql.insert(table).on_conflict_do_nothing()
    elif dialect == "sqlite":
        stmt = sqlite.insert(table).on_conflict_do_nothing()
    else:  # pragma: no cover - Cairn supports SQLite and PostgreSQL
        raise RuntimeError(f"unsupported database {dialect}")
    connection = session.connection()  # Core, not the ORM's bulk path: no identity map
    for start in range(0, len(rows), 1000):
        connection.execute(stmt, rows[start:start + 1000])
