"""The read-only unit of work list pages use, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from services.db import Database
from services.records.volumes import Volume

# Its subject is the database: SQLite's and PostgreSQL's transactions differ.
pytestmark = pytest.mark.both_databases


@pytest.fixture
def db(fresh_database_url: str) -> Iterator[Database]:
    database = Database(fresh_database_url)
    yield database
    database.dispose()


def volume() -> Volume:
    return Volume(id=str(uuid.uuid4()), project_id="p", cluster="ceph-a", pool="volumes",
                  image=f"img-{uuid.uuid4().hex[:8]}", created_at=datetime.now(UTC))


def test_reading_sees_each_commit_as_it_lands(db: Database) -> None:
    with db.reading() as reader:
        count = select(func.count()).select_from(Volume)
        assert reader.scalar(count) == 0
        with db.session() as writer:
            writer.add(volume())
        # Autocommit: no snapshot held since the first statement, unlike a transaction.
        assert reader.scalar(count) == 1


def test_reading_refuses_to_write(db: Database) -> None:
    with db.reading() as reader:
        reader.add(volume())
        with pytest.raises(RuntimeError, match="read-only"):
            reader.flush()
    with db.session() as session:
        assert session.scalar(select(func.count()).select_from(Volume)) == 0


def test_a_connection_given_back_by_reading_is_transactional_again(db: Database) -> None:
    """The pool hands the same connection to the next unit of work: it must not stay in
    autocommit, or a failed write would be half kept."""
    with db.reading() as reader:
        reader.scalar(select(1))

    def fail_after_a_write() -> None:
        with db.session() as session:
            session.add(volume())
            session.flush()
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        fail_after_a_write()
    with db.session() as session:
        assert session.scalar(select(func.count()).select_from(Volume)) == 0
