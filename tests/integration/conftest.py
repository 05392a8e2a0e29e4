"""Fixtures on the real local stack (`make test` starts it: micro Ceph, Redis, PostgreSQL).

Integration tests run on PostgreSQL, production's database: `database_url` (and
`fresh_database_url`) is PostgreSQL unless the test is marked `both_databases`, which
runs it on SQLite as well. That mark is for what can differ between the two: migrations,
repositories and queries, locking and claims, the calendar, the scheduler's guarded
updates (CONTRIBUTING.md lists which tests keep both, and why). Each backend gets a
fresh, migrated database and its own worker, scheduler and Redis database.

tests/conftest.py checks once per run that the servers are up and the clusters can take
the tests' data. Under pytest-xdist each worker is a session of its own, with its own
databases, Redis databases (tests/support/workers.py) and Cairn processes. Tests that
share the real Keystone's projects take a lock, one process at a time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import rados

from tests.support import ceph
from tests.support.databases import migrated_database
from tests.support.openstack import keystone_tests_alone
from tests.support.reruns import ABORT_MARK
from tests.support.stack import Stack, start_stack, stop_stack
from tests.support.workers import RedisDb, redis_db

BACKENDS = ("sqlite", "postgresql")
DATABASE_FIXTURES = ("database_url", "fresh_database_url")


def _backends(definition: pytest.Function) -> tuple[str, ...]:
    if definition.get_closest_marker("production_database_only") is not None:
        return ("postgresql",)
    if definition.get_closest_marker("both_databases") is not None:
        return BACKENDS
    return ("postgresql",)


def _parametrized(definition: pytest.Function) -> set[str]:
    names: set[str] = set()
    for mark in definition.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs["argnames"]
        if isinstance(argnames, str):
            argnames = argnames.split(",")
        names |= {name.strip() for name in argnames}
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The backends of each test: PostgreSQL, and SQLite as well when marked
    `both_databases`. (A test that parametrizes the fixture itself keeps its choice.)"""
    chosen = _parametrized(metafunc.definition)
    for name in DATABASE_FIXTURES:
        if name in metafunc.fixturenames and name not in chosen:
            metafunc.parametrize(name, _backends(metafunc.definition), indirect=True)


@pytest.fixture(autouse=True)
def _one_keystone_test_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    if "cloud" not in request.fixturenames:
        yield
        return
    # They share Keystone's test projects and count what those hold: on two workers at
    # once they made the projects together (409s) and saw each other's volumes.
    # (pytest-xdist's `xdist_group` cannot keep them on one worker: deploy/local/test.sh.)
    with keystone_tests_alone():
        yield


@pytest.fixture(autouse=True)
def _stack_survives_aborts(request: pytest.FixtureRequest) -> Iterator[None]:
    """A stack process that librbd aborted (docs/operations.md) is started again before the
    next test, and the test it died under fails with `ABORT_MARK`, which makes `make test`
    run that test once more (tests/support/reruns.py)."""
    if "stack" not in request.fixturenames:
        yield
        return
    stack: Stack = request.getfixturevalue("stack")
    stack.revive_aborted()
    yield
    revived = stack.revive_aborted()
    if revived:
        pytest.fail(f"{ABORT_MARK} {', '.join(revived)} died of SIGABRT during this test "
                    "(librbd's abort; its stacks are at the end of its log in "
                    f"{stack.log_dir}); started again", pytrace=False)


@pytest.fixture(scope="session")
def database_url(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh database migrated to head, on the test's backend."""
    backend = getattr(request, "param", "postgresql")
    with migrated_database(backend, tmp_path_factory.mktemp("sqlite")) as url:
        yield url


@pytest.fixture(scope="session")
def stack(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """API, worker and scheduler on the given database."""
    use = RedisDb.SQLITE_STACK if database_url.startswith("sqlite") \
        else RedisDb.POSTGRESQL_STACK
    log_dir = Path(tmp_path_factory.mktemp("logs"))
    running = start_stack(database_url, redis_db(use), log_dir)
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


@pytest.fixture
def fresh_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of the test's own, migrated, on the test's backend: for tests that run
    their own scheduler processes, which must not see the session stack's rows (or be seen
    by its scheduler)."""
    with migrated_database(getattr(request, "param", "postgresql"), tmp_path) as url:
        yield url

