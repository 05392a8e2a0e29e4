"""Concurrency slots in the real Redis: all or nothing across scopes, renewable by their
holder, and freed by themselves within the lease time when the holder is killed."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from redis import Redis

from services.limits.leases import Leases, Scope
from tests.support.stack import REDIS_PORT
from tests.support.workers import RedisDb, redis_db

# The session's own Redis database, never flushed: every scope a test takes has a name
# of its own and expires by itself, so concurrent sessions and the stack are untouched.
REDIS_URL = f"redis://127.0.0.1:{REDIS_PORT}/{redis_db(RedisDb.SCRATCH)}"


@pytest.fixture
def leases() -> Iterator[Leases]:
    client = Redis.from_url(REDIS_URL)
    yield Leases(client, lease_seconds=2.0)
    client.close()


def scope(name: str, limit: int) -> Scope:
    return Scope(f"cairn:slots:test:{name}:{uuid.uuid4().hex[:6]}", limit, name)


def test_slots_are_all_or_nothing_and_renewable(leases: Leases) -> None:
    target, project = scope("target", 2), scope("project", 1)
    assert leases.acquire("job-1", [target, project]) is None
    # The project is full: job-2 takes nothing, not even the free target slot.
    assert leases.acquire("job-2", [target, project]) == project
    assert leases.holders(target) == ["job-1"]
    assert leases.acquire("job-1", [target, project]) is None   # a renewal, not a second slot
    leases.release("job-1", [target, project])
    assert leases.acquire("job-2", [target, project]) is None


# It times the lease to a tenth of a second: alone, after the parallel phase.
@pytest.mark.serial
def test_a_killed_holder_frees_its_slot_within_the_lease_time(leases: Leases) -> None:
    target = scope("target", 1)
    holder = subprocess.Popen([sys.executable, "-c", f"""
import time
from redis import Redis
from services.limits.leases import Leases, Scope
leases = Leases(Redis.from_url({REDIS_URL!r}), lease_seconds=2.0)
target = Scope({target.key!r}, 1, "target")
while True:  # a worker renewing its job's slot with every heartbeat
    assert leases.acquire("dead-job", [target]) is None
    print("held", flush=True)
    time.sleep(0.3)
"""], stdout=subprocess.PIPE)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == b"held"
    assert leases.acquire("waiting-job", [target]) == target
    holder.kill()
    holder.wait()
    killed = time.monotonic()
    while leases.acquire("waiting-job", [target]) is not None:
        assert time.monotonic() - killed < 3.0, "the dead holder's slot was never freed"
        time.sleep(0.05)
    assert time.monotonic() - killed <= 2.0 + 0.1  # within the lease time
