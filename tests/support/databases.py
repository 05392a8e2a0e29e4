"""Fresh databases for the integration tier: SQLite files and PostgreSQL databases on the
stack's server, migrated to head by Alembic as `cairn-manage db upgrade` does."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from alembic import command

from manage.main import alembic_config
from tests.support import janitor
from tests.support.stack import PG_PORT

PG_ADMIN = f"host=127.0.0.1 port={PG_PORT} user=postgres dbname=postgres"


def migrate(url: str, revision: str = "head") -> None:
    config = alembic_config(url)
    config.attributes["configure_logging"] = False
    command.upgrade(config, revision)


def new_pg_database() -> str:
    name = f"cairn_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_pg_database(name: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def migrated_database(backend: str, directory: Path) -> Iterator[str]:
    """A new database on `backend` (SQLite in `directory`), migrated to head; dropped after,
    with the backups its rows own (tests/support/janitor.py)."""
    if backend == "sqlite":
        url = f"sqlite:///{directory / 'cairn.db'}"
        migrate(url)
        yield url
        _release(url)
        return
    name = new_pg_database()
    url = f"postgresql+psycopg://postgres@127.0.0.1:{PG_PORT}/{name}"
    migrate(url)
    yield url
    _release(url)
    drop_pg_database(name)


def _release(url: str) -> None:
    left = janitor.release(url)
    if left:
        warnings.warn("left in the backup pools (remove by hand): " + "; ".join(left),
                      stacklevel=3)
