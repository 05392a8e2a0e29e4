"""Hostile-load benchmark (issue 13) on the local stack's PostgreSQL, Redis and ceph-a.

    make bench-hostile          # or: .venv/bin/python bench/hostile_load.py

Prints:

1. Load: cairn-api (uvicorn, `--api-workers` processes) with 10 000 restore points and jobs
   over 200 projects. 200 clients, each its own project, for `--seconds`, each sending a
   request every 2 s on average (open loop): restore point and job lists, gets of one
   restore point, and plan creations (with an Idempotency-Key). Meanwhile 40 more
   connections each send a plan's headers and 10 of its 1000 bytes and stall; when the
   server drops one (body timeout, 408) it comes back at once, so 40 are stalled at every
   moment. A probe reads /healthz and one tenant's list every 0.5 s. p50 / p99 / max per
   kind, and every error (anything but the expected status, or no answer).
2. Scheduler: 1000 enabled plans, every one due now; 990 with a daily cron rule, 10 at the
   worst case validation allows (an hourly RRULE whose start lies the allowed 366 days
   back, and a leap-day RRULE that walks to its next Feb 29). The time of the scheduler's
   round that turns them into jobs, and of the next round (nothing due).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import rados
import rbd
from sqlalchemy import insert

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from scheduler import (  # noqa: E402
    API_PORT,
    PG_PORT,
    REDIS_DB,
    REDIS_PORT,
    drop_database,
    flush_redis,
    new_database,
)

from services.db import Database  # noqa: E402
from services.plans import schedule, timing  # noqa: E402
from services.records.jobs import Job  # noqa: E402
from services.records.plans import Plan, PlanVolume, StoredRule  # noqa: E402
from services.records.restore_points import RestorePoint  # noqa: E402
from services.records.volumes import Volume  # noqa: E402
from services.scheduler.planner import schedule_due  # noqa: E402
from services.settings import Settings  # noqa: E402
from services.status import JobStatus, PlanStatus, RestorePointStatus  # noqa: E402

CEPH_CONF = REPO / ".state" / "ceph-a" / "ceph.conf"
PROJECTS = [f"tenant-{i:03d}" for i in range(200)]
NOW = datetime.now(UTC).replace(microsecond=0)


def stack_env(url: str) -> dict[str, str]:
    return {"CAIRN_ENVIRONMENT": "development", "CAIRN_AUTH_STRATEGY": "noauth",
            "CAIRN_DATABASE_URL": url,
            "CAIRN_REDIS_URL": f"redis://127.0.0.1:{REDIS_PORT}/{REDIS_DB}",
            "CAIRN_CLUSTERS": json.dumps({"ceph-a": {"conf": str(CEPH_CONF)}}),
            "CAIRN_BACKUP_TARGETS": json.dumps({"local": {"cluster": "ceph-a",
                                                          "pool": "backups"}}),
            "CAIRN_DEFAULT_BACKUP_TARGET": "local"}


def make_volume() -> str:
    name = f"bench-hostile-{uuid.uuid4().hex[:8]}"
    handle = rados.Rados(conffile=str(CEPH_CONF))
    handle.connect(timeout=10)
    try:
        with handle.open_ioctx("volumes") as io:
            rbd.RBD().create(io, name, 1 << 20)
    finally:
        handle.shutdown()
    return name


def remove_volume(name: str) -> None:
    handle = rados.Rados(conffile=str(CEPH_CONF))
    handle.connect(timeout=10)
    try:
        with handle.open_ioctx("volumes") as io:
            rbd.RBD().remove(io, name)
    finally:
        handle.shutdown()


def fill(db: Database, image: str) -> dict[str, list[str]]:
    """50 restore points and jobs per project; returns each project's restore point ids."""
    at = NOW - timedelta(days=30)
    ids: dict[str, list[str]] = {}
    volumes, rps, jobs = [], [], []
    for project in PROJECTS:
        volume = str(uuid.uuid4())
        volumes.append({"id": volume, "project_id": project, "cluster": "ceph-a",
                        "pool": "volumes", "image": image, "created_at": at})
        for i in range(50):
            rp = str(uuid.uuid4())
            when = at + timedelta(minutes=i)
            ids.setdefault(project, []).append(rp)
            rps.append({"id": rp, "project_id": project, "volume_id": volume,
                        "target": "local", "kind": "incremental",
                        "status": RestorePointStatus.AVAILABLE, "size_bytes": 1 << 20,
                        "bytes_copied": 1 << 20, "created_at": when, "completed_at": when})
            jobs.append({"id": str(uuid.uuid4()), "project_id": project, "kind": "backup",
                         "status": JobStatus.SUCCEEDED, "volume_id": volume,
                         "restore_point_id": rp, "target": "local", "attempt": 1,
                         "max_attempts": 3, "bytes_done": 1 << 20, "read_seconds": 0.1,
                         "write_seconds": 0.1, "qos_wait_seconds": 0.0, "engine_seconds": 0.0,
                         "copy_seconds": 0.1, "bytes_read": 1 << 20, "bytes_written": 1 << 20,
                         "bytes_resumed": 0, "created_at": when, "queued_at": when,
                         "started_at": when, "finished_at": when})
    with db.session() as session:
        session.execute(insert(Volume), volumes)
        session.execute(insert(RestorePoint), rps)
        session.execute(insert(Job), jobs)
    return ids


def start_api(url: str, workers: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "cairn-api"), "--port", str(API_PORT), "--workers",
         str(workers), "--log-level", "warning"],
        env={**os.environ, **stack_env(url)}, cwd=REPO)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", API_PORT), 1):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("cairn-api did not start")


async def request(method: str, target: str, project: str, body: bytes = b"",
                  extra: str = "") -> tuple[int, float]:
    """One request on a new connection (as a portal's or CLI's client makes them)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", API_PORT)
    try:
        started = time.monotonic()
        head = (f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Project-Id: {project}\r\n"
                f"X-Roles: member,reader\r\nConnection: close\r\n{extra}")
        if body:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        writer.write(head.encode() + b"\r\n" + body)
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        length = 0
        for line in answer.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        await reader.readexactly(length)
        return int(answer[9:12]), time.monotonic() - started
    finally:
        writer.close()


async def stalled_upload(stop: float, dropped: list[int]) -> None:
    """Keeps one upload stalled mid-body until `stop`, reconnecting when dropped."""
    while time.monotonic() < stop:
        reader, writer = await asyncio.open_connection("127.0.0.1", API_PORT)
        writer.write(b"POST /v1/plans HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Project-Id: stall\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                     b'{"name": "')
        try:
            await asyncio.wait_for(reader.read(1), max(0.1, stop - time.monotonic()))
            dropped.append(1)
        except TimeoutError:
            pass
        finally:
            writer.close()


async def load(seconds: float, ids: dict[str, list[str]], image: str,
               rate: float) -> dict[str, list[float]]:
    stop = time.monotonic() + seconds
    timings: dict[str, list[float]] = {}
    errors: list[str] = []
    dropped: list[int] = []

    def record(kind: str, status: int, expected: int, took: float) -> None:
        timings.setdefault(kind, []).append(took)
        if status != expected:
            errors.append(f"{kind}: {status}")

    async def client(n: int) -> None:
        rng = random.Random(n)
        project = PROJECTS[n]
        await asyncio.sleep(rng.random() / rate)
        while time.monotonic() < stop:
            pick = rng.random()
            try:
                if pick < 0.45:
                    status, took = await request("GET", "/v1/restore-points?limit=50", project)
                    record("list restore points", status, 200, took)
                elif pick < 0.60:
                    status, took = await request("GET", "/v1/jobs?limit=50", project)
                    record("list jobs", status, 200, took)
                elif pick < 0.85:
                    status, took = await request(
                        "GET", f"/v1/restore-points/{rng.choice(ids[project])}", project)
                    record("get restore point", status, 200, took)
                else:
                    body = json.dumps({"name": f"p-{uuid.uuid4().hex[:12]}",
                                       "volumes": [f"ceph-a/volumes/{image}"],
                                       "rules": [{"cron": "0 2 * * *"}], "enabled": False})
                    status, took = await request(
                        "POST", "/v1/plans", project, body.encode(),
                        f"Idempotency-Key: {uuid.uuid4()}\r\n")
                    record("create plan", status, 201, took)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                errors.append(f"{type(exc).__name__}")
            await asyncio.sleep(rng.expovariate(rate))

    async def probe() -> None:
        while time.monotonic() < stop:
            try:
                status, took = await request("GET", "/healthz", "probe")
                record("probe: /healthz", status, 200, took)
                status, took = await request("GET", "/v1/plans?limit=10", PROJECTS[0])
                record("probe: a tenant's list", status, 200, took)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                errors.append(f"probe {type(exc).__name__}")
            await asyncio.sleep(0.5)

    stalls = [asyncio.create_task(stalled_upload(stop, dropped)) for _ in range(40)]
    await asyncio.sleep(0.5)  # the stalled uploads are in before the clients start
    await asyncio.gather(probe(), *(client(n) for n in range(200)))
    for task in stalls:
        task.cancel()
    print(f"  stalled uploads dropped by the server (body timeout): {len(dropped)}")
    print(f"  errors: {len(errors)} {sorted(set(errors)) if errors else ''}")
    return timings


def summarize(timings: dict[str, list[float]], seconds: float) -> None:
    def p(ordered: list[float], q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    for kind, values in sorted(timings.items()):
        ordered = sorted(values)
        print(f"  {kind:<24} n={len(ordered):6d} ({len(ordered) / seconds:5.1f}/s)  "
              f"p50 {p(ordered, 0.5):6.1f} ms  p99 {p(ordered, 0.99):6.1f} ms  "
              f"max {ordered[-1] * 1000:6.1f} ms"
              f"  (mean {statistics.mean(ordered) * 1000:.1f} ms)")


def bench_load(seconds: float, workers: int, rate: float) -> None:
    flush_redis()
    name, url = new_database()
    image = make_volume()
    api = None
    try:
        db = Database(url)
        ids = fill(db, image)
        db.dispose()
        api = start_api(url, workers)
        print(f"1. load: 200 clients x {rate} req/s for {seconds:.0f} s, 40 stalled uploads, "
              f"cairn-api --workers {workers}")
        timings = asyncio.run(load(seconds, ids, image, rate))
        summarize(timings, seconds)
    finally:
        if api is not None:
            api.terminate()
            api.wait(10)
        drop_database(name)
        remove_volume(image)


def bench_scheduler() -> None:
    name, url = new_database()
    try:
        db = Database(url)
        settings = Settings(database_url=url, auth_strategy="noauth", environment="development",
                            redis_url=f"redis://127.0.0.1:{REDIS_PORT}/{REDIS_DB}",
                            clusters={"ceph-a": {"conf": str(CEPH_CONF)}},  # type: ignore[dict-item]
                            backup_targets={"local": {"cluster": "ceph-a", "pool": "backups"}},  # type: ignore[dict-item]
                            max_jobs_per_target=100_000, max_jobs_per_project=100_000)
        start = (NOW - timedelta(days=366)).replace(tzinfo=None).isoformat()
        worst = [{"kind": "incremental", "rrule": "FREQ=HOURLY", "start": start},
                 {"kind": "full", "rrule": "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=1",
                  "start": start}]
        due = (NOW - timedelta(minutes=1)).replace(second=0)
        daily = [{"kind": "incremental", "cron": f"{due.minute} {due.hour} * * *"}]
        created = NOW - timedelta(days=1)
        plans, volumes, links = [], [], []
        for i in range(1000):
            plan_id, volume_id = str(uuid.uuid4()), str(uuid.uuid4())
            plans.append({"id": plan_id, "project_id": f"sched-{i}", "name": f"plan-{i}",
                          "target": "local", "timezone": "UTC",
                          "rules": worst if i < 10 else daily, "retention": {},
                          "status": PlanStatus.ENABLED, "next_slot_at": due,
                          "created_at": created, "updated_at": created})
            volumes.append({"id": volume_id, "project_id": f"sched-{i}", "cluster": "ceph-a",
                            "pool": "volumes", "image": f"sched-{i}", "created_at": created})
            links.append({"plan_id": plan_id, "volume_id": volume_id})
        for rules in (worst, daily):  # every stored rule is one the API accepts
            typed = [StoredRule.model_validate(r) for r in rules]
            schedule.check_rules(timing.compile_rules(typed, "UTC"), NOW,
                                 settings.schedule_min_interval)
        with db.session() as session:
            session.execute(insert(Volume), volumes)
            session.execute(insert(Plan), plans)
            session.execute(insert(PlanVolume), links)
        print("2. scheduler: 1000 plans due now, 10 at the worst case")
        for label in ("round with 1000 plans due", "next round (nothing due)"):
            t = time.monotonic()
            result = schedule_due(db, settings, NOW)
            print(f"  {label:<28} {time.monotonic() - t:6.3f} s  ({result.plans} plans, "
                  f"{result.queued} jobs queued)")
        db.dispose()
    finally:
        drop_database(name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--api-workers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=0.5, help="requests/s per client")
    parser.add_argument("--scheduler-only", action="store_true")
    args = parser.parse_args()
    print(f"PostgreSQL 127.0.0.1:{PG_PORT}, Redis db {REDIS_DB}, {NOW.isoformat()}")
    if not args.scheduler_only:
        bench_load(args.seconds, args.api_workers, args.rate)
    bench_scheduler()


if __name__ == "__main__":
    main()
