"""Migrations go up, down and up again on SQLite and PostgreSQL, and the schema they build
is exactly the one the models describe."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from manage.main import alembic_config
from services.db import make_engine
from services.records import Base
from services.webhooks.sealing import SecretSeal
from tests.support.databases import drop_pg_database, new_pg_database
from tests.support.stack import PG_PORT


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'migrate.db'}"
        return
    name = new_pg_database()
    yield f"postgresql+psycopg://postgres@127.0.0.1:{PG_PORT}/{name}"
    drop_pg_database(name)


ALL_TABLES = {"volumes", "restore_points", "jobs", "plans", "plan_volumes", "project_quotas",
              "volume_locks", "idempotent_requests", "webhooks", "event_deliveries",
              "restore_point_groups", "target_leases", "target_lease_gates",
              "object_target_keys"}


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(empty_database: str) -> None:
    config = alembic_config(empty_database)
    config.attributes["configure_logging"] = False
    command.upgrade(config, "head")
    assert tables(empty_database) == ALL_TABLES
    command.downgrade(config, "base")
    assert tables(empty_database) == set()
    command.upgrade(config, "head")
    assert tables(empty_database) == ALL_TABLES


def test_migrated_schema_matches_the_models(empty_database: str) -> None:
    config = alembic_config(empty_database)
    config.attributes["configure_logging"] = False
    command.upgrade(config, "head")
    engine = make_engine(empty_database)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_webhook_secrets_are_sealed_on_the_way_up_and_opened_on_the_way_down(
        empty_database: str) -> None:
    plain = '[{"secret": "whsec_c2VjcmV0LWZyb20tYmVmb3Jl", "expires_at": null}]'
    config = alembic_config(empty_database)
    config.attributes["configure_logging"] = False
    command.upgrade(config, "0016")  # the revision before the secrets are sealed
    engine = make_engine(empty_database)
    try:
        with engine.begin() as db:
            db.execute(text(
                "INSERT INTO webhooks (id, project_id, url, event_types, secrets, enabled, "
                "failed_deliveries, created_at, updated_at) VALUES ('w1', 'p1', "
                "'https://8.8.8.8/', '[]', :plain, true, 0, :now, :now)"),
                {"plain": plain, "now": datetime.now(UTC)})
        with pytest.raises(RuntimeError, match="CAIRN_WEBHOOK_SECRET_KEY_FILE is not set"):
            command.upgrade(config, "head")  # refused before anything changed
        assert "secrets" in {c["name"] for c in inspect(engine).get_columns("webhooks")}
        key = bytes(range(32))
        config.attributes["webhook_secret_key"] = key
        command.upgrade(config, "head")
        with engine.connect() as db:
            sealed = db.execute(text("SELECT sealed_secrets FROM webhooks")).scalar_one()
        assert "whsec_" not in sealed
        assert SecretSeal(key).open("w1", sealed) == plain
        command.downgrade(config, "0016")
        with engine.connect() as db:
            assert db.execute(text("SELECT secrets FROM webhooks")).scalar_one() == plain
    finally:
        engine.dispose()
