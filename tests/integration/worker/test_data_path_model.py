"""The randomized differential test of the whole data path (tests/support/model.py): seeded
random programs of volume changes (writes, zeros, discards, grow, shrink, clones, flatten),
full and incremental backups to two targets on two clusters, deletes in random order and
worker kills, checked after every step against the volume's bytes at each backup.

`make test` runs CAIRN_MODEL_CASES cases (default 30) from CAIRN_MODEL_SEED; `make soak
SEED=... CASES=...` runs many more, larger ones."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.model import Case, Limits, remove_deferred
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph

SEED = int(os.environ.get("CAIRN_MODEL_SEED", "20261123"))
CASES = int(os.environ.get("CAIRN_MODEL_CASES", "30"))
MAX_SIZE = int(os.environ.get("CAIRN_MODEL_MAX_MIB", "20")) * MiB
KILL_CHANCE = float(os.environ.get("CAIRN_MODEL_KILL_CHANCE", "0.07"))
"""Of a backup (half of it for a restore): each kill costs a worker restart and a heartbeat
timeout, so `make test` kills a little less often than `make soak` (0.1)."""


@pytest.fixture(scope="module", autouse=True)
def _remove_deferred_images() -> Iterator[None]:
    yield
    with ceph.ioctx("ceph-a", "volumes") as io:
        remove_deferred(io)


# On PostgreSQL only (production's database): the data path does not depend on it, and
# the run stays within a few minutes.
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize("seed", range(SEED, SEED + CASES))
def test_every_available_restore_point_restores(stack: Stack, volumes_pool: rados.Ioctx,
                                                seed: int) -> None:
    Case(stack, seed, volumes_pool, Limits(max_size=MAX_SIZE, kill_chance=KILL_CHANCE)).run()
