"""Fixtures on the real local stack (`make test` starts it: micro Ceph, Redis, PostgreSQL).

Integration tests run once on SQLite and once on PostgreSQL: `database_url` is
parametrized, and each backend gets a fresh, migrated database and its own worker,
scheduler and Redis database."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import rados

from tests.support import ceph, rgw
from tests.support.ceph import conf_path
from tests.support.databases import migrated_database
from tests.support.stack import PG_PORT, REDIS_PORT, Stack, start_stack, stop_stack


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session", autouse=True)
def _local_stack_is_up() -> None:
    missing = [what for what, ok in [
        ("micro Ceph ceph-a", conf_path("ceph-a").exists()),
        ("micro Ceph ceph-b (CAIRN_SECOND_CLUSTER=1)", conf_path("ceph-b").exists()),
        ("Ceph RGW on ceph-a (CAIRN_RGW=1)", rgw.CREDENTIALS.exists()),
        (f"Redis on {REDIS_PORT}", _listening(REDIS_PORT)),
        (f"PostgreSQL on {PG_PORT}", _listening(PG_PORT)),
    ] if not ok]
    if missing:
        pytest.exit(f"the local stack is not running ({', '.join(missing)}): run `make test`, "
                    "which starts it", returncode=3)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked production_database_only run on PostgreSQL alone."""
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        param = params.get("database_url", params.get("fresh_database_url"))
        only = item.get_closest_marker("production_database_only") is not None
        (dropped if only and param == "sqlite" else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh database migrated to head, on each backend in turn."""
    with migrated_database(request.param, tmp_path_factory.mktemp("sqlite")) as url:
        yield url


@pytest.fixture(scope="session")
def stack(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """API, worker and scheduler on the given database."""
    # `make soak` runs beside `make test` on Redis databases of its own.
    redis_db = (1 if database_url.startswith("sqlite") else 2) + int(
        os.environ.get("CAIRN_TEST_REDIS_DB_OFFSET", "0"))
    log_dir = Path(tmp_path_factory.mktemp("logs"))
    running = start_stack(database_url, redis_db, log_dir)
    yield running
    stop_stack(running)


@pytest.fixture
def volumes_pool() -> Iterator[rados.Ioctx]:
    """The micro cluster's `volumes` pool, where tests make their source images."""
    with ceph.ioctx("ceph-a", "volumes") as io:
        yield io


@pytest.fixture
def backups_pool() -> Iterator[rados.Ioctx]:
    """The `backups` pool the `local` target writes to."""
    with ceph.ioctx("ceph-a", "backups") as io:
        yield io


@pytest.fixture
def offsite_pool() -> Iterator[rados.Ioctx]:
    """The `backups` pool on ceph-b, which the `offsite` target writes to."""
    with ceph.ioctx("ceph-b", "backups") as io:
        yield io


@pytest.fixture
def offsite_volumes() -> Iterator[rados.Ioctx]:
    """ceph-b's `volumes` pool, a place to restore into on the other cluster."""
    with ceph.ioctx("ceph-b", "volumes") as io:
        yield io


@pytest.fixture
def images(volumes_pool: rados.Ioctx) -> Iterator[list[str]]:
    """Names of images the test makes in the volumes pool; removed afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        ceph.remove_image(volumes_pool, name)


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of the test's own, migrated, on each backend: for tests that run their
    own scheduler processes, which must not see the session stack's rows (or be seen by its
    scheduler)."""
    with migrated_database(request.param, tmp_path) as url:
        yield url
