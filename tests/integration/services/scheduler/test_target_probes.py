"""A backup target whose cluster does not answer costs its probe the connect timeout; the
scheduler's round (admission, the schedule, webhooks) must not wait for it. Before, with
the probe in the round, every job on a healthy target started about ten seconds late."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB, conf_path
from tests.support.flows import start_backup
from tests.support.redis_server import free_port
from tests.support.stack import (
    Stack,
    directory_target_env,
    object_target_env,
    start_stack,
    stop_stack,
)
from tests.support.workers import RedisDb, redis_db

pytestmark = pytest.mark.ceph

REDIS_DB = redis_db(RedisDb.SCRATCH)


@pytest.fixture
def stack_with_a_dead_target(fresh_database_url: str, tmp_path: Path) -> Iterator[Stack]:
    # A cluster whose monitor address nothing listens on: connects time out.
    dead = tmp_path / "dead.conf"
    dead.write_text(f"[global]\nmon host = v2:127.0.0.1:{free_port()}\n"
                    "auth cluster required = none\nauth service required = none\n"
                    "auth client required = none\n")
    clusters = {"ceph-a": {"conf": str(conf_path("ceph-a"))}, "dead": {"conf": str(dead)}}
    targets = {"local": {"cluster": "ceph-a", "pool": "backups"},
               "away": {"cluster": "dead", "pool": "backups"}}
    # The local RGW's bucket, and an S3 endpoint nothing listens on.
    stores = json.loads(object_target_env(fresh_database_url)["CAIRN_OBJECT_TARGETS"])
    stores["gone"] = {**stores["s3"], "endpoint": f"http://127.0.0.1:{free_port()}",
                      "timeout_seconds": 2}
    # The stack's directory, and one whose share is not mounted here.
    directories = json.loads(directory_target_env(fresh_database_url)[
        "CAIRN_DIRECTORY_TARGETS"])
    directories["unmounted"] = {"path": str(tmp_path / "not-mounted")}
    stack = start_stack(fresh_database_url, REDIS_DB, tmp_path / "logs",
                        CAIRN_CLUSTERS=json.dumps(clusters),
                        CAIRN_BACKUP_TARGETS=json.dumps(targets),
                        CAIRN_OBJECT_TARGETS=json.dumps(stores),
                        CAIRN_DIRECTORY_TARGETS=json.dumps(directories),
                        CAIRN_CEPH_CONNECT_TIMEOUT_SECONDS="5",
                        # One job at a time on `local`: the others wait for admission.
                        CAIRN_MAX_JOBS_PER_TARGET="1")
    yield stack
    stop_stack(stack)


# It times three backups and the scheduler's rounds: alone, after the parallel phase.
@pytest.mark.serial
def test_an_unreachable_target_does_not_delay_the_others(
        stack_with_a_dead_target: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    stack = stack_with_a_dead_target
    names = [ceph.random_image(volumes_pool, "probe", 5 * MiB + 3, seed=71 + i)
             for i in range(3)]
    images.extend(names)
    # The stack probes every second; each probe of `away` takes the 5 s connect timeout.
    deadline = time.monotonic() + 30
    while "backup target away (dead/backups) did not answer" not in \
            stack.scheduler.log.read_text():
        assert time.monotonic() < deadline, stack.scheduler.log.read_text()
        time.sleep(0.2)
    started = time.monotonic()
    ids = [start_backup(stack, name)["id"] for name in names]
    jobs = [stack.wait_job(job_id) for job_id in ids]
    took = time.monotonic() - started
    assert all(job["status"] == "succeeded" for job in jobs), jobs
    # Three short backups one after the other. With the probe in the round, the round ran
    # once per probe (5 s), so the second and third started 5 and 10 s late.
    waits = [job["timings"]["phases"]["queue_wait"] for job in jobs]
    assert took < 6.0, (took, waits)
    # The jobs above may have been started by the worker that freed the slot; the round
    # itself is what must never take a probe's timeout.
    rounds = _tick_buckets(stack)
    assert rounds["+Inf"] >= 5, rounds
    assert rounds["2.5"] == rounds["+Inf"], f"rounds that took over 2.5 s: {rounds}"


def _tick_buckets(stack: Stack) -> dict[str, float]:
    port = stack.env["CAIRN_SCHEDULER_METRICS_PORT"]
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    prefix = "cairn_scheduler_tick_seconds_bucket{le=\""
    return {line[len(prefix):].split("\"")[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith(prefix)}


@pytest.mark.production_database_only  # the probes touch no database
def test_every_target_reports_whether_it_answers(stack_with_a_dead_target: Stack) -> None:
    """cairn_target_up for RBD pools, object stores and directories alike: the alert on a
    target that stopped answering (deploy/prometheus/) covers the off-site bucket and an
    unmounted share too."""
    port = stack_with_a_dead_target.env["CAIRN_SCHEDULER_METRICS_PORT"]
    wanted = {"local": 1.0, "away": 0.0, "s3": 1.0, "gone": 0.0, "dir": 1.0,
              "unmounted": 0.0}
    deadline = time.monotonic() + 40
    while True:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        found = {line.split('"')[1]: float(line.rsplit(" ", 1)[1])
                 for line in text.splitlines() if line.startswith("cairn_target_up{")}
        if found == wanted:
            break
        assert time.monotonic() < deadline, found
        time.sleep(0.5)
    log = stack_with_a_dead_target.scheduler.log.read_text()
    assert "object target gone (http://127.0.0.1:" in log
    assert "directory target unmounted (" in log
    assert "does not exist (not mounted here?)" in log
