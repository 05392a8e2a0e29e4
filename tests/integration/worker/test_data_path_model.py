"""The randomized differential test of the whole data path (tests/support/model.py): seeded
random programs of volume changes (writes, zeros, discards, grow, shrink, clones, flatten),
full and incremental backups, deletes in random order and worker kills, checked after every
step against the volume's bytes at each backup. Each case backs up to one kind of target,
its seed's (the kinds of CAIRN_MODEL_TARGETS in name order, in turn: by default the two RBD
pools `local` and `offsite` on two clusters, the object target `s3`, the directory target
`dir`), copies its restore points off site, restores some instantly and collects garbage
where the targets' capabilities say Cairn does, and checks that Cairn refuses where they
say it does not (tests/support/model_targets.py). On the RBD kind a seed runs the very
program it ran before the model knew other kinds; `CAIRN_MODEL_TARGETS=local,offsite`
(`make soak MODEL_TARGETS=local,offsite`) runs every seed on it.

`make test` runs CAIRN_MODEL_CASES cases (default 12) from CAIRN_MODEL_SEED on
PostgreSQL, and the first CAIRN_MODEL_SQLITE_CASES of them (default 3) on SQLite too: the
same programs on both databases, whose rows (restore points, chains, guarded updates
under worker kills) are the test's database side, each of the three on another kind. 12
was the shortest run of seeds from the default that still found each deliberate breakage
of the data path that the earlier 30 found, when every case ran on RBD (an incremental
that keeps an emptied object's old data failed seed 20261134 alone, which draws the RBD
kind; CONTRIBUTING.md has the table). `make soak SEED=... CASES=...` runs many more,
larger ones, on PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.model import Case, Limits
from tests.support.model_targets import DEFAULT_TARGETS
from tests.support.model_volume import remove_deferred
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph

SEED = int(os.environ.get("CAIRN_MODEL_SEED", "20261123"))
CASES = int(os.environ.get("CAIRN_MODEL_CASES", "12"))
SQLITE_CASES = int(os.environ.get("CAIRN_MODEL_SQLITE_CASES", "3"))
MAX_SIZE = int(os.environ.get("CAIRN_MODEL_MAX_MIB", "20")) * MiB
KILL_CHANCE = float(os.environ.get("CAIRN_MODEL_KILL_CHANCE", "0.07"))
"""Of a backup (half of it for a restore): each kill costs a worker restart and a heartbeat
timeout, so `make test` kills a little less often than `make soak` (0.1)."""
TARGETS = tuple(os.environ.get("CAIRN_MODEL_TARGETS", ",".join(DEFAULT_TARGETS)).split(","))
"""The stack's targets the cases back up and copy to; their kinds are what the seeds draw."""


@pytest.fixture(scope="module", autouse=True)
def _remove_deferred_images() -> Iterator[None]:
    yield
    with ceph.ioctx("ceph-a", "volumes") as io:
        remove_deferred(io)


# The data path does not depend on the database; its rows do. A failing case replays
# with `make soak SEED=<seed> CASES=1` (PostgreSQL), or with `-k <seed>-sqlite` here.
RUNS = [pytest.param(seed, backend, id=f"{seed}-{backend}")
        for backend, count in (("postgresql", CASES), ("sqlite", min(SQLITE_CASES, CASES)))
        for seed in range(SEED, SEED + count)]


@pytest.mark.parametrize(("seed", "database_url"), RUNS, indirect=["database_url"])
def test_every_available_restore_point_restores(stack: Stack, volumes_pool: rados.Ioctx,
                                                seed: int) -> None:
    Case(stack, seed, volumes_pool, Limits(max_size=MAX_SIZE, kill_chance=KILL_CHANCE),
         TARGETS).run()
