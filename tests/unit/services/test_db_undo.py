"""A unit of work that rolls back (its commit failing included) undoes what it did outside
the database, e.g. the Cinder volume a restore request made (pure logic on a real SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from services.db import Database, undo_on_rollback


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(f"sqlite:///{tmp_path / 'undo.db'}")
    with database.session() as session:
        session.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY)"))
    return database


def test_a_rolled_back_unit_of_work_runs_its_undo_steps_newest_first(db: Database) -> None:
    undone: list[str] = []

    def request() -> None:
        with db.session() as session:
            undo_on_rollback(session, lambda: undone.append("first"), "first")
            undo_on_rollback(session, lambda: undone.append("second"), "second")
            raise RuntimeError("the request failed after making things")

    with pytest.raises(RuntimeError):
        request()
    assert undone == ["second", "first"]


def test_a_failed_statement_runs_them_too_and_a_failing_step_does_not_stop_the_others(
        db: Database) -> None:
    undone: list[str] = []

    def broken() -> None:
        raise OSError("Cinder away")

    def request() -> None:
        with db.session() as session:
            undo_on_rollback(session, lambda: undone.append("volume"), "volume")
            undo_on_rollback(session, broken, "broken")
            session.execute(text("INSERT INTO t (id) VALUES (1), (1)"))

    with pytest.raises(Exception, match="UNIQUE"):
        request()
    assert undone == ["volume"]


def test_a_committed_unit_of_work_keeps_what_it_made(db: Database) -> None:
    undone: list[str] = []
    with db.session() as session:
        undo_on_rollback(session, lambda: undone.append("volume"), "volume")
    assert undone == []
    with db.session() as session:  # the next unit of work does not inherit the step
        pass
    assert undone == []
