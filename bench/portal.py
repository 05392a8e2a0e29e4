"""Portal benchmark (issue 14): is the portal fast at cloud scale?

    make bench-portal        # or, with the stack's Keystone and Cinder up:
    .venv/bin/python bench/portal.py [--volumes 1000] [--restore-points 100000] [--rounds 5]

On the local stack's Keystone, Cinder (its RBD driver on ceph-a) and PostgreSQL, a project
of its own (`cairn-bench-portal`, apart from the tests' projects) gets `--volumes` real
Cinder volumes (thin 1 GiB images, made once and kept between runs)
and Cairn's database `--restore-points` available restore points with as many backup jobs
(the busiest volume holds a fifth of them, the rest spread over the others); a plan covers
half the volumes. cairn-api serves the built portal (`make portal`) and Debian's Chromium,
driven by Playwright (`bench/portal_render.mjs`), times the screens from a fresh page load
each round. It prints:

1. the initial JavaScript and CSS (what index.html loads before anything is drawn), raw
   and gzip-compressed as cairn-api sends them; issue 14's budget: 300 KiB of JavaScript;
2. the Overview's first contentful paint and the moment its figures are drawn (their data
   read from Cinder and the database), from the start of the navigation; budget: 1 s;
3. a page of the Volumes screen (50 volumes with their plans, last backup, next run and
   restore point count) and of the busiest volume's restore points (100, with the 13-week
   calendar), from the click until the frame that shows them, the next page of each
   ("Show more"), and both at twice the size (`per_page`); budget: 300 ms;
4. the longest main-thread task during each screen (under 50 ms: none is reported).

Medians and maxima over `--rounds`. The stack, Cinder's API and the browser share this
machine's cores.

To find where a screen's time goes: `CAIRN_BENCH_TRACE=1` prints the API calls behind the
volume and restore point pages of each round (start, wait for the first byte, end), and
`CAIRN_BENCH_PROFILE=FILE` writes a Chromium trace of the last round's restore point page
(open it in DevTools' Performance panel).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import insert, select, text

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_rows import succeeded_backup_job  # noqa: E402

from services.db import Database  # noqa: E402
from services.openstack.cinder import CinderApi  # noqa: E402
from services.records.jobs import Job  # noqa: E402
from services.records.restore_points import RestorePoint  # noqa: E402
from services.records.volumes import Volume  # noqa: E402
from services.settings import Settings  # noqa: E402
from services.status import RestorePointKind, RestorePointStatus  # noqa: E402
from tests.support.databases import migrated_database  # noqa: E402
from tests.support.openstack import (  # noqa: E402
    PASSWORD,
    User,
    admin,
    admin_cinder,
    image_of,
    keystone_up,
    make_cloud,
    start_cairn,
)

KIB = 1024
PORTAL = REPO / "portal"
NAME = "portal-bench-{:04d}"
PROJECT = "cairn-bench-portal"
MEMBER = "portal-bench-member"
VOLUME_PAGE = 50
POINT_PAGE = 100
"""The portal's default page sizes (portal/src/api/volumes.ts, pages/VolumeDetail.tsx)."""
BUDGET_SCRIPT_KIB = 300
BUDGET_FIRST_PAINT_MS = 1000
BUDGET_PAGE_MS = 300
CHROMIUM = os.environ.get("CAIRN_CHROMIUM", "/usr/bin/chromium")
PRODUCTION_PACE = {
    f"CAIRN_{name.upper()}": str(Settings.model_fields[name].default)
    for name in ("token_cache_seconds", "scheduler_tick_seconds", "reconcile_interval_seconds",
                 "target_probe_interval_seconds", "progress_interval_seconds",
                 "job_heartbeat_timeout_seconds", "lease_seconds",
                 "job_redispatch_after_seconds")}
"""Production's settings where the test stack's are quick (tokens validated at Keystone
once a minute, not every second; the scheduler and workers' loops at their own pace, not
five times a second): on two cores, the test stack's pace takes CPU from the pages timed."""


# ---------------------------------------------------------------- what the page loads first
def initial_assets() -> list[tuple[str, int, int]]:
    """(name, bytes, gzip bytes) of each script and stylesheet index.html loads."""
    index = (PORTAL / "dist" / "index.html").read_text()
    out = []
    for path in re.findall(r'(?:src|href)="(/assets/[^"]+\.(?:js|css))"', index):
        data = (PORTAL / "dist" / path.lstrip("/")).read_bytes()
        # cairn-api's GZipMiddleware compresses at level 9.
        out.append((path.rsplit("/", 1)[1], len(data), len(gzip.compress(data, 9))))
    return out


# ---------------------------------------------------------------- the project
def cinder_volumes(member: User, count: int) -> list[str]:
    """The bench's Cinder volumes of the project, made when missing (kept between runs:
    a thousand take Cinder minutes to make). Newest first, as the portal lists them."""
    api: CinderApi = member.cinder()
    existing = {v.name: v.id for v in api.list_volumes() if v.name.startswith("portal-bench-")}
    wanted = [NAME.format(i) for i in range(count)]
    missing = [name for name in wanted if name not in existing]
    if missing:
        started = time.monotonic()

        def make(name: str) -> tuple[str, str]:
            volume = api.create(size_gb=1, name=name, volume_type=None,
                                description="bench/portal.py", metadata={})
            api.wait_for(volume.id, "available", 600)
            return name, volume.id

        with ThreadPoolExecutor(8) as pool:
            existing.update(pool.map(make, missing))
        print(f"# made {len(missing)} Cinder volumes in {time.monotonic() - started:.0f} s",
              flush=True)
    return [existing[name] for name in reversed(wanted)]


def fill(db: Database, project: str, cinder_ids: list[str], count: int) -> str:
    """Volume rows for the volumes, `count` restore points and backup jobs; returns the
    busiest volume's Cinder id."""
    now = datetime.now(UTC)
    with db.session() as session:
        known = dict(session.execute(select(Volume.cinder_volume_id, Volume.id).where(
            Volume.project_id == project)).tuples().all())
        rows = [{"id": str(uuid.uuid4()), "project_id": project, "cluster": "ceph-a",
                 "pool": "volumes", "image": image_of(cinder_id), "cinder_volume_id": cinder_id,
                 "created_at": now - timedelta(days=400)}
                for cinder_id in cinder_ids if cinder_id not in known]
        if rows:
            session.execute(insert(Volume), rows)
        known.update((r["cinder_volume_id"], r["id"]) for r in rows)
    row_ids = [known[c] for c in cinder_ids]
    busiest = row_ids[0]
    heavy = count // 5
    span = timedelta(days=400)
    for start in range(0, count, 10_000):
        points, jobs = [], []
        for i in range(start, min(count, start + 10_000)):
            if i < heavy:
                volume, at = busiest, now - span * (i / heavy)
            else:
                j = i - heavy
                volume = row_ids[1 + j % (len(row_ids) - 1)]
                at = now - span * ((j // (len(row_ids) - 1)) / max(1, (count - heavy) //
                                                                   (len(row_ids) - 1)))
            point_id = str(uuid.uuid4())
            kind = RestorePointKind.FULL if i % 7 == 0 else RestorePointKind.INCREMENTAL
            points.append({"id": point_id, "project_id": project, "volume_id": volume,
                           "target": "local", "kind": kind,
                           "status": RestorePointStatus.AVAILABLE, "size_bytes": 1 << 30,
                           "bytes_copied": 1 << 24, "duration_seconds": 2.5,
                           "created_at": at, "completed_at": at})
            jobs.append(succeeded_backup_job(project, volume, point_id, at))
        with db.session() as session:
            session.execute(insert(RestorePoint), points)
            session.execute(insert(Job), jobs)
    # Settle the loaded tables (statistics, visibility map) before measuring, as a
    # database that has lived with these rows would be.
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM (ANALYZE)"))
    return cinder_ids[0]


# ---------------------------------------------------------------- the report
def row(label: str, values: list[float], budget: float | None = None) -> str:
    med, top = statistics.median(values), max(values)
    verdict = "" if budget is None else (
        f"  {med / budget:.2f}x budget {budget:.0f} ms" + ("" if med <= budget else "  OVER"))
    return f"  {label:<44} median {med:7.0f} ms   max {top:7.0f} ms{verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--volumes", type=int, default=1000)
    parser.add_argument("--restore-points", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not keystone_up():
        sys.exit("Keystone is not running: `make bench-portal` starts the stack with it")
    if not (PORTAL / "dist" / "index.html").is_file():
        sys.exit("the portal is not built: `make portal`")
    print(f"# portal: {args.volumes} Cinder volumes, {args.restore_points} restore points "
          f"and as many jobs in project {PROJECT}; {args.rounds} rounds; {platform.node()}, "
          f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}", flush=True)

    assets = initial_assets()
    script_gz = sum(gz for name, _, gz in assets if name.endswith(".js"))
    print("\n1. What index.html loads before the first paint")
    for name, raw, gz in assets:
        print(f"  {name:<44} {raw / KIB:7.1f} KiB   gzip {gz / KIB:6.1f} KiB")
    print(f"  initial JavaScript, gzip: {script_gz / KIB:.1f} KiB "
          f"({script_gz / KIB / BUDGET_SCRIPT_KIB:.2f}x budget {BUDGET_SCRIPT_KIB} KiB)",
          flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        make_cloud(directory)  # Cairn's service user and the region
        ident = admin()
        project_id = ident.ensure_project(PROJECT)
        ident.grant(ident.ensure_user(MEMBER, PASSWORD), project_id, "member")
        member = User(MEMBER, PROJECT, project_id)
        cinder_admin = admin_cinder()
        cinder_admin.session.put(f"/os-quota-sets/{member.project_id}",
                          endpoint_filter=cinder_admin.endpoint_filter,
                          json={"quota_set": {"volumes": -1, "gigabytes": -1,
                                              "snapshots": -1}})
        ids = cinder_volumes(member, args.volumes)
        with migrated_database("postgresql", directory) as url:
            cairn = start_cairn(url, 8, directory / "logs", **PRODUCTION_PACE)
            try:
                token = member.token()
                plan = cairn.call("POST", "/v1/plans", token, json={
                    "name": "nightly", "volumes": ids[: len(ids) // 2],
                    "rules": [{"cron": "0 2 * * *", "kind": "incremental"},
                              {"cron": "0 3 * * 0", "kind": "full"}],
                    "retention": {"keep_daily": 14, "keep_weekly": 8, "keep_monthly": 12}})
                assert plan.status_code == 201, plan.text
                started = time.monotonic()
                busiest = fill(Database(url), member.project_id, ids, args.restore_points)
                print(f"# {args.restore_points} restore points and jobs loaded in "
                      f"{time.monotonic() - started:.0f} s", flush=True)
                # Warm what any long-lived API process has warm (imports, connections).
                httpx.get(f"{cairn.url}/v1/overview", headers={"X-Auth-Token": token},
                          timeout=60).raise_for_status()
                node_bin = Path(sys.executable).parent
                run = subprocess.run(
                    ["node", str(REPO / "bench" / "portal_render.mjs")],
                    capture_output=True, text=True, timeout=1800, check=False,
                    env={**os.environ, "PATH": f"{node_bin}:{os.environ['PATH']}",
                         "CAIRN_PORTAL_DIR": str(PORTAL), "CAIRN_PORTAL_URL": cairn.url,
                         "CAIRN_CHROMIUM": CHROMIUM, "CAIRN_BENCH_USER": member.name,
                         "CAIRN_BENCH_PASSWORD": PASSWORD,
                         "CAIRN_BENCH_VOLUME_ID": busiest,
                         "CAIRN_BENCH_VOLUME_PAGE": str(VOLUME_PAGE),
                         "CAIRN_BENCH_POINT_PAGE": str(POINT_PAGE),
                         "CAIRN_BENCH_ROUNDS": str(args.rounds)})
                if run.returncode != 0:
                    sys.exit(f"the browser run failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
                if os.environ.get("CAIRN_BENCH_TRACE"):  # the API calls behind each screen
                    print(run.stderr, flush=True)
                t = json.loads(run.stdout)
            finally:
                cairn.stop()

    print("\n2. Overview, from the start of the navigation")
    print(row("first contentful paint", t["overview_first_paint"], BUDGET_FIRST_PAINT_MS))
    print(row("its figures drawn (Cinder and database read)", t["overview_figures"]))
    print(row("longest main-thread task", t["overview_longest_task"]))
    print(f"\n3. A page of {VOLUME_PAGE} volumes of {args.volumes}, from the click")
    print(row("first page drawn", t["volumes_page"], BUDGET_PAGE_MS))
    print(row("Show more: next page drawn", t["volumes_next_page"], BUDGET_PAGE_MS))
    print(row("longest main-thread task", t["volumes_longest_task"]))
    print(f"\n   A page of {POINT_PAGE} restore points of the busiest volume "
          f"({args.restore_points // 5} of {args.restore_points}), from the click")
    print(row("first page and calendar drawn", t["points_page"], BUDGET_PAGE_MS))
    print(row("Show more: next page drawn", t["points_next_page"], BUDGET_PAGE_MS))
    print(row("longest main-thread task", t["points_longest_task"]))
    print(row("opened by its address (the app loads first)", t["points_page_cold"]))
    print(f"\n   Jobs ({args.restore_points} in the project), opened from inside the app")
    print(row("the newest 100 drawn", t["jobs_page"], BUDGET_PAGE_MS))
    print(row("Show more: the next 100 drawn", t["jobs_next_page"], BUDGET_PAGE_MS))
    print("\n   Twice the page (per_page), opened from inside the app")
    print(row(f"{2 * VOLUME_PAGE} volumes", t["volumes_page_double"], BUDGET_PAGE_MS))
    print(row(f"{2 * POINT_PAGE} restore points", t["points_page_double"], BUDGET_PAGE_MS))
    print("\nThe Cinder volumes stay for the next run; `make down` and `make up` start a "
          "fresh stack.")


if __name__ == "__main__":
    main()
