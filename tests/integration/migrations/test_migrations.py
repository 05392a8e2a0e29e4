"""Migrations go up, down and up again on SQLite and PostgreSQL, and the schema they build
is exactly the one the models describe."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import inspect, text
from sqlalchemy.orm import Session

from manage.main import alembic_config
from services.db import make_engine
from services.records import Base, ProjectQuota
from services.webhooks.sealing import Keyring, key_id
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
              "webhook_sealing_key", "object_target_keys"}


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


def _webhooks_before_sealing(url: str, count: int) -> list[str]:
    """`count` webhooks as revision 0016 stored them, each with a plaintext secret; the
    secrets."""
    config = alembic_config(url)
    config.attributes["configure_logging"] = False
    command.upgrade(config, "0016")  # the revision before the secrets are sealed
    plains = [f'[{{"secret": "whsec_PLAINTEXT{n:05d}c2VjcmV0", "expires_at": null}}]'
              for n in range(count)]
    engine = make_engine(url)
    try:
        with engine.begin() as db:
            for n, plain in enumerate(plains):
                db.execute(text(
                    "INSERT INTO webhooks (id, project_id, url, event_types, secrets, enabled, "
                    "failed_deliveries, created_at, updated_at) VALUES (:id, 'p1', "
                    "'https://8.8.8.8/', '[]', :plain, true, 0, :now, :now)"),
                    {"id": f"w{n}", "plain": plain, "now": datetime.now(UTC)})
    finally:
        engine.dispose()
    return plains


def test_webhook_secrets_are_sealed_on_the_way_up_and_opened_on_the_way_down(
        empty_database: str) -> None:
    (plain,) = _webhooks_before_sealing(empty_database, 1)
    config = alembic_config(empty_database)
    config.attributes["configure_logging"] = False
    engine = make_engine(empty_database)
    try:
        with pytest.raises(RuntimeError, match="CAIRN_WEBHOOK_SECRET_KEY_FILE is not set"):
            command.upgrade(config, "head")  # refused before anything changed
        assert "secrets" in {c["name"] for c in inspect(engine).get_columns("webhooks")}
        key, old = bytes(range(32)), bytes(range(1, 33))
        config.attributes["webhook_secret_key"] = [key, old]  # a ring: the first seals
        command.upgrade(config, "head")
        with engine.connect() as db:
            sealed = db.execute(text("SELECT sealed_secrets FROM webhooks")).scalar_one()
            recorded = db.execute(text("SELECT key_id FROM webhook_sealing_key")).scalar_one()
        assert "whsec_" not in sealed
        # What the migration's frozen copy sealed, today's code opens; the key it sealed
        # under is the deployment's.
        assert Keyring([old, key]).open("w0", sealed) == plain
        assert recorded == key_id(key)
        config.attributes["webhook_secret_key"] = [old, key]
        command.downgrade(config, "0016")
        with engine.connect() as db:
            assert db.execute(text("SELECT secrets FROM webhooks")).scalar_one() == plain
    finally:
        engine.dispose()


def test_the_storage_limit_in_bytes_keeps_the_old_column_and_the_old_limits(
        empty_database: str) -> None:
    """0015 with data: limits in GiB become bytes (one too large for a BIGINT of bytes is
    clamped, not an aborted upgrade or a REAL the API cannot read), `gigabytes` stays for
    the processes of the release before, committed restore points get a first figure
    (bytes read on object targets, whose bytes copied are compressed), and down and up
    again keeps the limits."""
    config = alembic_config(empty_database)
    config.attributes["configure_logging"] = False
    command.upgrade(config, "0014")
    engine = make_engine(empty_database)
    at = "2026-11-20 02:00:00"
    try:
        with engine.begin() as db:
            db.execute(text("INSERT INTO project_quotas (project_id, restore_points, gigabytes, "
                            "updated_at) VALUES ('five', NULL, 5, :at), "
                            "('huge', NULL, 9007199254740992, :at), ('none', 7, NULL, :at)"),
                       {"at": at})
            db.execute(text("INSERT INTO volumes (id, project_id, cluster, pool, image, "
                            "created_at) VALUES ('v', 'five', 'ceph-a', 'volumes', 'img', :at)"),
                       {"at": at})
            db.execute(text(
                "INSERT INTO restore_points (id, project_id, volume_id, target, kind, status, "
                "bytes_copied, bytes_read, checksum_algorithm, created_at, completed_at) VALUES "
                "('rbd', 'five', 'v', 'local', 'full', 'available', 8, 9, 'xxh3-128', :at, :at),"
                "('obj', 'five', 'v', 's3', 'full', 'available', 2, 9, 'blake3-keyed', :at, :at),"
                "('failed', 'five', 'v', 'local', 'full', 'error', 5, 5, NULL, :at, NULL)"),
                {"at": at})
        command.upgrade(config, "head")
        with engine.begin() as db:
            limits = dict(db.execute(text(
                "SELECT project_id, max_bytes FROM project_quotas")).all())
            kept = dict(db.execute(text(
                "SELECT project_id, gigabytes FROM project_quotas")).all())
            figures = dict(db.execute(text("SELECT id, quota_bytes FROM restore_points")).all())
        assert limits == {"five": 5 * 2**30, "huge": 2**62, "none": None}
        assert kept == {"five": 5, "huge": 2**32, "none": None}
        assert figures == {"rbd": 8, "obj": 9, "failed": 0}
        with Session(engine) as session:  # the models read every row
            quotas = {q.project_id: q.max_bytes for q in session.query(ProjectQuota)}
        assert quotas == limits
        command.downgrade(config, "0014")
        with engine.begin() as db:
            back = dict(db.execute(text(
                "SELECT project_id, gigabytes FROM project_quotas")).all())
        assert back == {"five": 5, "huge": 2**32, "none": None}
        command.upgrade(config, "head")
    finally:
        engine.dispose()


def test_no_row_the_upgrade_leaves_holds_a_plaintext_secret(empty_database: str) -> None:
    """Every row version the upgrade writes is sealed only: the UPDATE that seals a row also
    empties its plaintext, so the dropped column carries none. On PostgreSQL the versions
    it replaced stay as dead tuples until `VACUUM FULL webhooks` (docs/operations.md), after
    which the table's file holds none either; SQLite overwrites what it frees."""
    _webhooks_before_sealing(empty_database, 300)
    config = alembic_config(empty_database)
    config.attributes["configure_logging"] = False
    config.attributes["webhook_secret_key"] = bytes(range(32))
    command.upgrade(config, "head")
    engine = make_engine(empty_database)
    try:
        if engine.dialect.name == "sqlite":
            engine.dispose()
            path = Path(empty_database.removeprefix("sqlite:///"))
            left = b"".join(found.read_bytes() for found in path.parent.glob(path.name + "*"))
            assert b"PLAINTEXT" not in left
            return
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as db:
            db.execute(text("CREATE EXTENSION IF NOT EXISTS pageinspect"))
            pages = db.execute(text(
                "SELECT pg_relation_size('webhooks') / current_setting('block_size')::int"
            )).scalar_one()
            live = [bytes(row[0]) for page in range(pages) for row in db.execute(text(
                "SELECT t_data FROM heap_page_items(get_raw_page('webhooks', :page)) "
                "WHERE t_xmax = 0 AND t_data IS NOT NULL"), {"page": page})]
            assert len(live) == 300
            assert not [row for row in live if b"PLAINTEXT" in row]
            db.execute(text("VACUUM FULL webhooks"))
            db.execute(text("CHECKPOINT"))
            stored = bytes(db.execute(text(
                "SELECT pg_read_binary_file(pg_relation_filepath('webhooks'))")).scalar_one())
            assert b"whsec_" not in stored
            assert b"PLAINTEXT" not in stored
    finally:
        engine.dispose()


def test_a_database_sealed_before_key_ids_goes_back_and_up_again(empty_database: str) -> None:
    """0017 was changed before its release: a development database it migrated holds values
    without a key id and no `webhook_sealing_key`. `cairn-manage db downgrade 0016` opens
    them under the key file's keys, and the upgrade seals them as 0017 does now."""
    (plain,) = _webhooks_before_sealing(empty_database, 1)
    key = bytes(range(32))
    config = alembic_config(empty_database)
    config.attributes["configure_logging"] = False
    config.attributes["webhook_secret_key"] = key
    command.upgrade(config, "head")
    nonce = bytes(12)
    earlier = "sealed:v1:" + base64.b64encode(nonce + AESGCM(key).encrypt(
        nonce, plain.encode(), b"cairn webhook v1 secrets w0")).decode()
    engine = make_engine(empty_database)
    try:
        with engine.begin() as db:
            db.execute(text("UPDATE webhooks SET sealed_secrets = :v"), {"v": earlier})
            db.execute(text("DROP TABLE webhook_sealing_key"))
        command.downgrade(config, "0016")
        with engine.connect() as db:
            assert db.execute(text("SELECT secrets FROM webhooks")).scalar_one() == plain
        command.upgrade(config, "head")
        with engine.connect() as db:
            sealed = db.execute(text("SELECT sealed_secrets FROM webhooks")).scalar_one()
        assert Keyring([key]).open("w0", sealed) == plain
    finally:
        engine.dispose()
