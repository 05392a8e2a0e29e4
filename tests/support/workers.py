"""What each pytest-xdist worker owns on the shared servers, so that workers running at the
same time never meet: its Redis databases (Celery's broker and the slot leases live there),
and through them its own Cairn processes. Its PostgreSQL databases and SQLite files are
new per session already, its RGW prefixes carry its process id, and its Ceph images
carry a uuid.

Without xdist the session is worker 0, with the databases the suite always used."""

from __future__ import annotations

import os
from enum import IntEnum

NAME = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
"""gw0, gw1, ... (xdist's names)."""
INDEX = int(NAME.removeprefix("gw")) if NAME.removeprefix("gw").isdigit() else 0
REDIS_DATABASES = 64
"""deploy/local/stack.sh starts Redis with 64 databases."""


class RedisDb(IntEnum):
    """A worker's Redis databases, by what uses them. The session-scoped Cairns live at the
    same time, so each has its own; the tests that start Cairn processes or leases of their
    own run one at a time within a worker, and share the scratch database."""

    SCRATCH = 0
    SQLITE_STACK = 1
    POSTGRESQL_STACK = 2
    OPENSTACK = 3
    MODULE_STACK = 4
    """A module's own stack that lives across its tests (the webhook rebinding tests'),
    while other modules' tests may run in between."""


PER_WORKER = len(RedisDb)


def redis_db(use: RedisDb) -> int:
    """This worker's database for `use`: CAIRN_TEST_REDIS_DB_OFFSET (a whole session's
    base, so `make soak` or a second checkout can run beside `make test`), then a block of
    PER_WORKER databases per worker."""
    base = int(os.environ.get("CAIRN_TEST_REDIS_DB_OFFSET", "0"))
    number = base + PER_WORKER * INDEX + use
    if number >= REDIS_DATABASES:
        raise RuntimeError(
            f"worker {NAME} would need Redis database {number}, and Redis has "
            f"{REDIS_DATABASES}: use fewer workers (-n) or a lower CAIRN_TEST_REDIS_DB_OFFSET "
            f"(each worker takes {PER_WORKER} databases from it)")
    return number
