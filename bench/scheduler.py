"""Scheduler and list-endpoint benchmark on PostgreSQL (the production database).

    make bench-scheduler            # or: .venv/bin/python bench/scheduler.py

Uses the local stack's PostgreSQL and Redis (`make bench-scheduler` starts them), in a
database and Redis db of its own, and prints:

1. Slots: 1000 plans x 10 volumes whose slot falls in the same minute. Time until the
   scheduler has made all 10 000 jobs (committed, `queued`), and until admission has sent
   them all to the broker (limits set high enough not to hold any back), with one scheduler
   and with two replicas racing.
2. Lists: 100 000 restore points (and 100 000 jobs) in one project; cairn-api (uvicorn,
   `--api-workers` processes) serves `GET /v1/restore-points` and `GET /v1/jobs` pages
   (first pages, deep pages by marker, filtered by volume) to 200 concurrent clients:
   closed loop (each client sends its next request as soon as the answer arrives) and
   open loop (each client a request every 4, 2 or 1 s). p50 / p99 / max and requests/s.
   The load generator runs on the same machine and takes its share of the cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg
from sqlalchemy import func, insert, select, text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_rows import succeeded_backup_job  # noqa: E402

from manage.main import alembic_config  # noqa: E402
from services.db import Database  # noqa: E402
from services.dispatch import Dispatcher, make_celery  # noqa: E402
from services.limits.leases import Leases  # noqa: E402
from services.plans import timing  # noqa: E402
from services.records.jobs import Job  # noqa: E402
from services.records.plans import Plan, PlanVolume  # noqa: E402
from services.records.restore_points import RestorePoint  # noqa: E402
from services.records.volumes import Volume  # noqa: E402
from services.scheduler.admission import Admission  # noqa: E402
from services.scheduler.planner import schedule_due  # noqa: E402
from services.settings import Settings  # noqa: E402
from services.status import PlanStatus, RestorePointStatus  # noqa: E402

PG_PORT = int(os.environ.get("CAIRN_PG_PORT", "31432"))
REDIS_PORT = int(os.environ.get("CAIRN_REDIS_PORT", "31379"))
REDIS_DB = 9
API_PORT = 31787
PROJECT = "bench-project"
SLOT = datetime(2026, 11, 20, 2, 0, tzinfo=UTC)


def new_database() -> tuple[str, str]:
    name = f"cairn_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"host=127.0.0.1 port={PG_PORT} user=postgres dbname=postgres",
                         autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+psycopg://postgres@127.0.0.1:{PG_PORT}/{name}"
    from alembic import command
    config = alembic_config(url)
    config.attributes["configure_logging"] = False
    command.upgrade(config, "head")
    return name, url


def drop_database(name: str) -> None:
    with psycopg.connect(f"host=127.0.0.1 port={PG_PORT} user=postgres dbname=postgres",
                         autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def flush_redis() -> None:
    subprocess.run(["redis-cli", "-p", str(REDIS_PORT), "-n", str(REDIS_DB), "flushdb"],
                   check=True, capture_output=True)


def settings_for(url: str) -> Settings:
    return Settings(auth_strategy="noauth", environment="development",
                    database_url=url, redis_url=f"redis://127.0.0.1:{REDIS_PORT}/{REDIS_DB}",
                    clusters={"ceph-a": {"conf": "/dev/null"}},  # type: ignore[dict-item]
                    backup_targets={"local": {"cluster": "ceph-a", "pool": "backups"}},  # type: ignore[dict-item]
                    max_jobs_per_target=100_000, max_jobs_per_project=100_000)


def make_plans(db: Database, plans: int, volumes_each: int) -> None:
    """Plans whose next slot is SLOT (rows inserted in bulk: the setup is not measured)."""
    now = SLOT - timedelta(minutes=30)
    volume_rows, plan_rows, links = [], [], []
    rules = [{"kind": "incremental", "cron": "0 2 * * *"}]
    for p in range(plans):
        plan_id = str(uuid.uuid4())
        plan_rows.append({"id": plan_id, "project_id": f"project-{p % 50}", "name": f"p{p}",
                          "target": "local", "timezone": "UTC", "rules": rules,
                          "retention": {}, "status": PlanStatus.ENABLED, "next_slot_at": SLOT,
                          "created_at": now, "updated_at": now,
                          "last_pruned_at": now + timedelta(days=1)})
        for v in range(volumes_each):
            volume_id = str(uuid.uuid4())
            volume_rows.append({"id": volume_id, "project_id": f"project-{p % 50}",
                                "cluster": "ceph-a", "pool": "volumes", "image": f"v{p}-{v}",
                                "created_at": now})
            links.append({"plan_id": plan_id, "volume_id": volume_id})
    with db.session() as session:
        session.execute(insert(Volume), volume_rows)
        session.execute(insert(Plan), plan_rows)
        session.execute(insert(PlanVolume), links)
    with db.session() as session:  # the cursor is what the scheduler computes itself
        plan = session.get(Plan, plan_rows[0]["id"])
        assert plan is not None
        assert timing.next_slot_after(plan, now) == SLOT


def count_jobs(db: Database, sent: bool = False) -> int:
    with db.session() as session:
        stmt = select(func.count()).select_from(Job).where(Job.slot_at == SLOT)
        if sent:
            stmt = stmt.where(Job.sent_at.is_not(None))
        return int(session.scalar(stmt) or 0)


def bench_slots(replicas: int, plans: int, volumes_each: int) -> dict[str, float]:
    name, url = new_database()
    flush_redis()
    try:
        settings = settings_for(url)
        db = Database(url)
        make_plans(db, plans, volumes_each)
        expected = plans * volumes_each
        now = SLOT + timedelta(seconds=5)
        marks: dict[str, float] = {}
        start = time.monotonic()

        def replica() -> None:
            own = Database(url)
            leases = Leases.from_settings(settings)
            admission = Admission(own, leases, Dispatcher(make_celery(settings.redis_url)),
                                  settings)
            schedule_due(own, settings, now)
            while count_jobs(own, sent=True) < expected:
                admission.admit(now)
            own.dispose()
            leases.close()

        threads = [threading.Thread(target=replica) for _ in range(replicas)]
        for t in threads:
            t.start()
        while count_jobs(db) < expected:
            time.sleep(0.01)
        marks["jobs_created_s"] = time.monotonic() - start
        for t in threads:
            t.join()
        marks["all_sent_s"] = time.monotonic() - start
        marks["jobs"] = count_jobs(db)
        redis_len = subprocess.run(["redis-cli", "-p", str(REDIS_PORT), "-n", str(REDIS_DB),
                                    "llen", "cairn"], capture_output=True, text=True,
                                   check=True).stdout.strip()
        marks["broker_messages"] = float(redis_len)
        db.dispose()
        return marks
    finally:
        drop_database(name)
        flush_redis()


def fill_lists(db: Database, count: int) -> list[str]:
    """`count` restore points and as many jobs over 100 volumes of one project."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    volumes = [{"id": str(uuid.uuid4()), "project_id": PROJECT, "cluster": "ceph-a",
                "pool": "volumes", "image": f"vol-{i}", "created_at": now} for i in range(100)]
    with db.session() as session:
        session.execute(insert(Volume), volumes)
    for start in range(0, count, 10_000):
        rps, jobs = [], []
        for i in range(start, min(count, start + 10_000)):
            rp_id = str(uuid.uuid4())
            at = now + timedelta(minutes=i)
            volume = volumes[i % 100]["id"]
            rps.append({"id": rp_id, "project_id": PROJECT, "volume_id": volume,
                        "target": "local", "kind": "incremental",
                        "status": RestorePointStatus.AVAILABLE, "size_bytes": 1 << 30,
                        "bytes_copied": 1 << 24, "created_at": at, "completed_at": at})
            jobs.append(succeeded_backup_job(PROJECT, volume, rp_id, at))
        with db.session() as session:
            session.execute(insert(RestorePoint), rps)
            session.execute(insert(Job), jobs)
    # Settle the freshly loaded tables first (visibility map, statistics): otherwise
    # autovacuum processes the 200 000 new rows during the measurement, on the same cores.
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM (ANALYZE)"))
    return [f"ceph-a/volumes/vol-{i}" for i in range(100)]


def start_api(url: str, workers: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CAIRN_ENVIRONMENT": "development", "CAIRN_AUTH_STRATEGY": "noauth",
           "CAIRN_DATABASE_URL": url,
           "CAIRN_REDIS_URL": f"redis://127.0.0.1:{REDIS_PORT}/{REDIS_DB}",
           "CAIRN_CLUSTERS": json.dumps({}), "CAIRN_BACKUP_TARGETS": json.dumps({})}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "cairn-api"), "--port",
                             str(API_PORT), "--workers", str(workers), "--log-level",
                             "warning"], env=env, cwd=REPO)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{API_PORT}/healthz", timeout=1).status_code < 500:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("cairn-api did not start")


class _Connection:
    """One keep-alive HTTP/1.1 connection, written by hand: httpx costs the load generator
    1-2 ms of CPU per request, on the same two cores as the server it measures."""

    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, target: str) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", API_PORT)
        assert self.reader is not None
        self.writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          f"X-Project-Id: {PROJECT}\r\nX-Roles: reader\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        await self.reader.readexactly(length)
        return status

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


async def load(clients: int, seconds: float, volumes: list[str], markers: list[str],
               rate_per_client: float | None) -> list[float]:
    latencies: list[float] = []
    errors.clear()
    end = time.monotonic() + seconds

    async def one(n: int) -> None:
        rng = random.Random(n)
        conn = _Connection()
        # Spread the clients over one period, or an open loop arrives in bursts.
        period = 1.0 / rate_per_client if rate_per_client else 1.0
        next_at = time.monotonic() + rng.random() * period
        try:
            while time.monotonic() < end:
                if rate_per_client is not None:
                    await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                    next_at += 1.0 / rate_per_client
                pick = rng.random()
                if pick < 0.4:
                    target = "/v1/restore-points?limit=100"
                elif pick < 0.6:
                    target = f"/v1/restore-points?limit=100&marker={rng.choice(markers)}"
                elif pick < 0.8:
                    target = f"/v1/restore-points?limit=50&volume={rng.choice(volumes)}"
                else:
                    target = "/v1/jobs?limit=100"
                t = time.monotonic()
                try:
                    status = await conn.get(target)
                except (OSError, asyncio.IncompleteReadError) as exc:
                    errors.append(f"{type(exc).__name__}")
                    conn.close()
                    continue
                latencies.append(time.monotonic() - t)
                if status != 200:
                    errors.append(f"{status}")
        finally:
            conn.close()

    await asyncio.gather(*(one(n) for n in range(clients)))
    return latencies


errors: list[str] = []
"""Failed requests of the last load run (connection errors, non-200 answers)."""


def summarize(name: str, latencies: list[float], seconds: float) -> None:
    ordered = sorted(latencies)
    p = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    print(f"  {name:<34} {len(ordered) / seconds:7.0f} req/s   p50 {p(0.50):6.1f} ms   "
          f"p99 {p(0.99):6.1f} ms   max {ordered[-1] * 1000:6.1f} ms   "
          f"(mean {statistics.mean(ordered) * 1000:.1f} ms, n={len(ordered)}, "
          f"errors {len(errors)}{' ' + str(sorted(set(errors))) if errors else ''})")


def bench_lists(count: int, workers: int, seconds: float) -> None:
    name, url = new_database()
    api = None
    try:
        db = Database(url)
        t = time.monotonic()
        volumes = fill_lists(db, count)
        print(f"  filled {count} restore points and {count} jobs in "
              f"{time.monotonic() - t:.1f} s")
        with db.session() as session:
            markers = list(session.scalars(select(RestorePoint.id).limit(2000)))
        db.dispose()
        api = start_api(url, workers)
        for label, rate in (("closed loop, 200 clients", None),
                            ("open loop, 200 clients x 0.25 req/s", 0.25),
                            ("open loop, 200 clients x 0.5 req/s", 0.5),
                            ("open loop, 200 clients x 1 req/s", 1.0)):
            asyncio.run(load(200, 2, volumes, markers, rate))  # warm up
            cpu = time.process_time()
            latencies = asyncio.run(load(200, seconds, volumes, markers, rate))
            summarize(label, latencies, seconds)
            print(f"  {'':<34} (load generator: {(time.process_time() - cpu) / seconds:.2f} "
                  "of a core)")
    finally:
        if api is not None:
            api.terminate()
            api.wait(10)
        drop_database(name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plans", type=int, default=1000)
    parser.add_argument("--volumes-per-plan", type=int, default=10)
    parser.add_argument("--restore-points", type=int, default=100_000)
    parser.add_argument("--api-workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--skip-lists", action="store_true")
    parser.add_argument("--skip-slots", action="store_true")
    args = parser.parse_args()
    print(f"host: {os.cpu_count()} cores; PostgreSQL on {PG_PORT}, Redis on {REDIS_PORT}")
    slots = args.plans * args.volumes_per_plan
    print(f"\n1. {slots} slots due in the same minute ({args.plans} plans x "
          f"{args.volumes_per_plan} volumes); goal: all enqueued within 10 s")
    for replicas in () if args.skip_slots else (1, 2):
        m = bench_slots(replicas, args.plans, args.volumes_per_plan)
        print(f"  {replicas} scheduler(s): {m['jobs']:.0f} jobs committed in "
              f"{m['jobs_created_s']:.2f} s, all sent to the broker in {m['all_sent_s']:.2f} s "
              f"({m['broker_messages']:.0f} messages)")
    if not args.skip_lists:
        print(f"\n2. list endpoints over {args.restore_points} restore points and as many "
              f"jobs; cairn-api with {args.api_workers} uvicorn workers; goal p99 < 50 ms "
              "with 200 concurrent clients")
        bench_lists(args.restore_points, args.api_workers, args.seconds)


if __name__ == "__main__":
    main()
