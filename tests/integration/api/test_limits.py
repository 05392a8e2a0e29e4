"""Concurrency limits on the real stack: a plan of 10 volumes (20 in `make soak`) on a
target limited to 3 never has more than 3 backups running, all complete, and killing the
worker mid-way (SIGKILL, holding slots) neither breaks the limit nor strands a job."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph

VOLUMES = int(os.environ.get("CAIRN_LIMITS_VOLUMES", "10"))
"""Over three times the limit: after the kill, jobs still wait behind the dead worker's
slots and the resumed ones, which is what the limit must hold against."""


@pytest.fixture
def volumes(volumes_pool: rados.Ioctx) -> Iterator[list[str]]:
    with ExitStack() as stack:
        yield [stack.enter_context(ceph.dense_image(volumes_pool, "limits", 4 * MiB,
                                                    seed=100 + i)) for i in range(VOLUMES)]


class RunningSampler:
    """Counts the plan's running jobs every 50 ms from its own thread."""

    def __init__(self, stack: Stack, plan_id: str) -> None:
        self.stack = stack
        self.plan_id = plan_id
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RunningSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            page = self.stack.get("/v1/jobs", plan_id=self.plan_id, kind="backup",
                                  status="running", limit=1000).json()
            self.samples.append(len(page["jobs"]))


def finished(stack: Stack, plan_id: str) -> list[dict[str, Any]]:
    jobs = stack.get("/v1/jobs", plan_id=plan_id, kind="backup", limit=1000).json()["jobs"]
    return [j for j in jobs if j["status"] in ("succeeded", "failed", "cancelled")]


def wait_all(stack: Stack, plan_id: str, timeout: float = 240) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = finished(stack, plan_id)
        if len(done) == VOLUMES:
            return done
        time.sleep(0.3)
    raise AssertionError(f"only {len(finished(stack, plan_id))} of {VOLUMES} jobs finished")


def test_a_plans_volumes_never_exceed_the_target_limit_even_across_a_worker_kill(
        stack: Stack, volumes: list[str], database_url: str) -> None:
    plan = stack.post("/v1/plans", {
        "name": ceph.unique_name("limits"), "target": "limited",
        "volumes": [f"ceph-a/volumes/{v}" for v in volumes],
        "rules": [{"cron": "0 3 * * *"}], "qos_bytes_per_second": 4 * MiB,
    }).json()
    kill_worker = database_url.startswith("postgresql")  # once is enough; it costs ~10 s
    with RunningSampler(stack, plan["id"]) as sampler:
        response = stack.post(f"/v1/plans/{plan['id']}/run", {"kind": "full"})
        assert response.status_code == 202, response.text
        assert len(response.json()["jobs"]) == VOLUMES
        if kill_worker:
            deadline = time.monotonic() + 30
            while not sampler.samples or sampler.samples[-1] < 3:
                assert time.monotonic() < deadline, "three backups never ran at once"
                time.sleep(0.05)
            stack.worker.kill()   # holds three slots; SIGKILL leaves them in Redis
            stack.worker.start("ready")
        done = wait_all(stack, plan["id"])
    failed = [(j["id"], j["attempt"], j["error"]) for j in done if j["status"] != "succeeded"]
    assert not failed, failed
    assert max(sampler.samples) == 3, sampler.samples  # the limit was used, and never passed
    assert len(sampler.samples) > 40
    if kill_worker:
        assert sorted(j["attempt"] for j in done)[-3:] == [2, 2, 2]  # the killed ones resumed
