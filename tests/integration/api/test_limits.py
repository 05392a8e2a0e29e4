"""Concurrency limits on the real stack: on a target limited to 3 slots, a project that
queues 7 backups (17 in `make soak`) never runs more than its share (max_jobs_per_project,
2), while another project's 3 backups run beside them on the same target; the target never
has more than 3 running, all complete, and killing the worker mid-way (SIGKILL, holding
slots) neither breaks a limit nor strands a job."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
import rados
import sqlalchemy

from services import targets
from services.limits.leases import project_share
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph

VOLUMES = int(os.environ.get("CAIRN_LIMITS_VOLUMES", "10"))
"""Over three times the target's limit: after the kill, jobs still wait behind the dead
worker's slots and the resumed ones, which is what the limits must hold against."""
SMALL = 3
"""One more than a project's share, so the small project waits too."""
BIG = VOLUMES - SMALL
TARGET = "limited"


@pytest.fixture
def volumes(volumes_pool: rados.Ioctx) -> Iterator[list[str]]:
    with ExitStack() as stack:
        yield [stack.enter_context(ceph.dense_image(volumes_pool, "limits", 4 * MiB,
                                                    seed=100 + i)) for i in range(BIG + SMALL)]


class RunningSampler:
    """Counts the two projects' running jobs on the target every 50 ms from its own thread,
    in one statement (a consistent snapshot of both)."""

    def __init__(self, stack: Stack, projects: tuple[str, str]) -> None:
        self.engine = sqlalchemy.create_engine(stack.settings.database_url)
        self.projects = projects
        self.samples: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RunningSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.engine.dispose()

    def _run(self) -> None:
        query = sqlalchemy.text(
            "SELECT project_id, count(*) FROM jobs WHERE status = 'running' AND target = :t "
            "AND project_id IN (:a, :b) GROUP BY project_id")
        with self.engine.connect() as db:
            while not self._stop.wait(0.05):
                counts = dict(db.execute(query, {"t": TARGET, "a": self.projects[0],
                                                 "b": self.projects[1]}).all())
                db.commit()  # a fresh snapshot each time
                self.samples.append((counts.get(self.projects[0], 0),
                                     counts.get(self.projects[1], 0)))

    @property
    def totals(self) -> list[int]:
        return [a + b for a, b in self.samples]


def member_of(project: str) -> dict[str, str]:
    return {"X-Project-Id": project, "X-Roles": "member"}


def plan_of(stack: Stack, project: str, volumes: list[str]) -> dict[str, Any]:
    answer = stack.post("/v1/plans", {
        "name": ceph.unique_name("limits"), "target": TARGET,
        "volumes": [f"ceph-a/volumes/{v}" for v in volumes],
        "rules": [{"cron": "0 3 * * *"}], "qos_bytes_per_second": 4 * MiB,
    }, member_of(project))
    assert answer.status_code == 201, answer.text
    plan: dict[str, Any] = answer.json()
    return plan


def run(stack: Stack, project: str, plan: dict[str, Any], count: int) -> None:
    response = stack.post(f"/v1/plans/{plan['id']}/run", {"kind": "full"}, member_of(project))
    assert response.status_code == 202, response.text
    assert len(response.json()["jobs"]) == count


def finished(stack: Stack, project: str, plan_id: str) -> list[dict[str, Any]]:
    jobs = stack.get("/v1/jobs", member_of(project), plan_id=plan_id, kind="backup",
                     limit=1000).json()["jobs"]
    return [j for j in jobs if j["status"] in ("succeeded", "failed", "cancelled")]


def wait_all(stack: Stack, plans: list[tuple[str, str, int]],
             timeout: float = 240) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    done: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        done = [j for project, plan_id, _ in plans for j in finished(stack, project, plan_id)]
        if len(done) == sum(count for _, _, count in plans):
            return done
        time.sleep(0.3)
    raise AssertionError(f"only {len(done)} jobs finished\n" + stack.busy_with())


def wait_until(check: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_project_runs_its_share_of_a_target_beside_another_even_across_a_worker_kill(
        stack: Stack, volumes: list[str], database_url: str) -> None:
    slots = targets.job_limit(stack.settings, TARGET)
    share = project_share(stack.settings, slots)
    assert (slots, share, stack.settings.max_jobs_per_project) == (3, 2, 2)
    big, small = ceph.unique_name("tenant-big"), ceph.unique_name("tenant-small")
    big_plan = plan_of(stack, big, volumes[:BIG])
    small_plan = plan_of(stack, small, volumes[BIG:])
    kill_worker = database_url.startswith("postgresql")  # once is enough; it costs ~10 s
    with RunningSampler(stack, (big, small)) as sampler:
        # The big project queues far more than its share first; the target keeps a slot.
        run(stack, big, big_plan, BIG)
        wait_until(lambda: sampler.samples and sampler.samples[-1][0] == share,
                   "the big project never ran its share")
        run(stack, small, small_plan, SMALL)
        wait_until(lambda: sampler.samples and sampler.totals[-1] == slots,
                   "the target's slots were never all in use")
        if kill_worker:
            stack.worker.kill()   # holds three slots; SIGKILL leaves them in Redis
            stack.worker.start("ready")
        done = wait_all(stack, [(big, big_plan["id"], BIG), (small, small_plan["id"], SMALL)])
    failed = [(j["id"], j["attempt"], j["error"]) for j in done if j["status"] != "succeeded"]
    assert not failed, failed
    # Neither project ever ran more than its share; the target's limit was used and never
    # passed; and the small project's jobs ran while the big one's were still queued.
    assert max(a for a, _ in sampler.samples) == share, sampler.samples
    assert max(b for _, b in sampler.samples) <= share, sampler.samples
    assert max(sampler.totals) == slots, sampler.samples
    assert any(a == share and b > 0 for a, b in sampler.samples), sampler.samples
    big_done = finished(stack, big, big_plan["id"])
    small_done = finished(stack, small, small_plan["id"])
    assert min(j["timings"]["started_at"] for j in small_done) < max(
        j["timings"]["started_at"] for j in big_done)
    assert len(sampler.samples) > 40
    if kill_worker:
        assert sorted(j["attempt"] for j in done)[-3:] == [2, 2, 2]  # the killed ones resumed
