"""Inserting job rows that a unique index may refuse (a slot another scheduler already took,
a prune already queued): the refused rows are dropped, never raised, in one statement on
either backend."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from services.base import new_id, utcnow
from services.records.jobs import Job


def job_values(**values: Any) -> dict[str, Any]:
    """A complete row for a bulk insert (Core does not run the ORM's defaults for columns
    left out of some rows)."""
    now = utcnow()
    row: dict[str, Any] = {
        "id": new_id(), "created_at": now, "queued_at": now, "attempt": 0, "max_attempts": 3,
        "bytes_done": 0, "read_seconds": 0.0, "write_seconds": 0.0, "qos_wait_seconds": 0.0,
        "engine_seconds": 0.0, "copy_seconds": 0.0, "bytes_read": 0, "bytes_written": 0,
        "bytes_resumed": 0, "volume_id": None, "restore_point_id": None, "target": None,
        "backup_kind": None, "plan_id": None, "slot_at": None, "not_before": None,
        "qos_bytes_per_second": None, "qos_ops_per_second": None, "error_code": None,
        "error_message": None, "summary": None, "finished_at": None, "warnings": None,
        "verify_fraction": None,
    }
    row.update(values)
    return row


def insert_ignoring_conflicts(session: Session, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    stmt: Insert
    if dialect == "postgresql":
        stmt = postgresql.insert(Job).on_conflict_do_nothing()
    elif dialect == "sqlite":
        stmt = sqlite.insert(Job).on_conflict_do_nothing()
    else:  # pragma: no cover - Cairn supports SQLite and PostgreSQL
        raise RuntimeError(f"unsupported database {dialect}")
    connection = session.connection()  # Core, not the ORM's bulk path: no identity map
    for start in range(0, len(rows), 1000):
        connection.execute(stmt, rows[start:start + 1000])
