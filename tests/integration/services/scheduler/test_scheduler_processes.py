"""Real cairn-scheduler processes on a database of their own, driven by a file clock: two
replicas racing over 1000 due slots, and a scheduler killed and restarted across missed
slots. No worker runs: these tests are about which jobs exist."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.clock import set_file_clock
from services.db import Database
from services.records.jobs import Job
from services.status import JobStatus
from tests.support.factories import count_by_status, duplicate_slots, jobs_of, make_plan
from tests.support.redis_server import free_port
from tests.support.rounds import metrics_port, wait_rounds
from tests.support.stack import BIN, REDIS_PORT, Process, service_env
from tests.support.workers import RedisDb, redis_db

# Two replicas racing for the same slots: the databases lock differently.
pytestmark = pytest.mark.both_databases

HOURLY = [{"kind": "incremental", "cron": "0 * * * *"}]
T0 = datetime(2026, 11, 20, 0, 30, tzinfo=UTC)
REDIS_DB = redis_db(RedisDb.SCRATCH)


@pytest.fixture
def clock(tmp_path: Path) -> Path:
    path = tmp_path / "clock"
    set_file_clock(path, T0)
    return path


@pytest.fixture
def schedulers(fresh_database_url: str, clock: Path,
               tmp_path: Path) -> Iterator[Callable[[str], Process]]:
    subprocess.run(["redis-cli", "-p", str(REDIS_PORT), "-n", str(REDIS_DB), "flushdb"],
                   check=True, capture_output=True)
    env = service_env(fresh_database_url, REDIS_DB, CAIRN_CLOCK_FILE=str(clock),
                      CAIRN_MISFIRE_GRACE_SECONDS="5400")
    started: list[Process] = []

    def start(name: str) -> Process:
        # Each replica serves its metrics on a port of its own: the tests count its rounds.
        own = {**env, "CAIRN_SCHEDULER_METRICS_PORT": str(free_port())}
        proc = Process(name, [str(BIN / "cairn-scheduler")], own, tmp_path / f"{name}.log")
        proc.start("cairn-scheduler started")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
    subprocess.run(["redis-cli", "-p", str(REDIS_PORT), "-n", str(REDIS_DB), "flushdb"],
                   check=True, capture_output=True)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_schedulers_make_exactly_one_job_per_slot(fresh_database_url: str, clock: Path,
                                                      schedulers: Callable[[str], Process]
                                                      ) -> None:
    db = Database(fresh_database_url)
    plans = [make_plan(db, project=f"project-{i % 7}", volumes=10, rules=HOURLY, now=T0)
             for i in range(100)]
    first, second = schedulers("scheduler-1"), schedulers("scheduler-2")
    set_file_clock(clock, datetime(2026, 11, 20, 1, 0, 5, tzinfo=UTC))  # 1000 slots due

    def total() -> int:
        return sum(count_by_status(db, plans).values())

    wait_for(lambda: total() >= 1000, 60, "1000 jobs")
    for replica in (first, second):  # several more rounds of both: nothing may be added
        wait_rounds(metrics_port(replica.env), 3)
    assert total() == 1000
    assert duplicate_slots(db) == 0
    for plan in plans[:5]:
        assert {j.slot_at for j in jobs_of(db, plan)} == {datetime(2026, 11, 20, 1, 0,
                                                                   tzinfo=UTC)}
    for replica in (first, second):
        assert replica.proc is not None
        assert replica.proc.poll() is None, f"{replica.name} died; see {replica.log}"
    db.dispose()


def test_restarted_scheduler_runs_recent_missed_slot_once_and_skips_older(
        fresh_database_url: str, clock: Path, schedulers: Callable[[str], Process]) -> None:
    db = Database(fresh_database_url)
    plan = make_plan(db, project="project-r", volumes=2, rules=HOURLY, now=T0)
    scheduler = schedulers("scheduler")
    set_file_clock(clock, datetime(2026, 11, 20, 1, 0, 5, tzinfo=UTC))
    wait_for(lambda: len(jobs_of(db, plan)) == 2, 30, "the 01:00 jobs")
    scheduler.kill()
    with db.session() as session:  # as if a worker had run them
        session.query(Job).filter(Job.plan_id == plan).update({"status": JobStatus.SUCCEEDED})
    # Down from 01:00 to 05:10: 02:00 and 03:00 are older than the 1 h 30 grace.
    set_file_clock(clock, datetime(2026, 11, 20, 5, 10, tzinfo=UTC))
    scheduler.start("cairn-scheduler started")
    wait_for(lambda: len(jobs_of(db, plan)) == 10, 30, "the missed slots' jobs")
    wait_rounds(metrics_port(scheduler.env), 3)  # rounds that could add a job: none may
    per_slot = sorted({(j.slot_at.hour if j.slot_at else -1, str(j.status), j.error_code)
                       for j in jobs_of(db, plan)})
    assert per_slot == [
        (1, "succeeded", None),
        (2, "skipped", "misfire"),
        (3, "skipped", "misfire"),
        (4, "skipped", "superseded"),
        (5, "queued", None),
    ]
    assert len(jobs_of(db, plan)) == 10  # 5 slots x 2 volumes, each exactly once
    db.dispose()
