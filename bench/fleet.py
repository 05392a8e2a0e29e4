"""Nightly-fleet benchmark (issue 16): does a cloud's night of backups fit in the night?

N Cinder volumes (default 20 x 1 GiB, a quarter of each filled with data) of one project
on the local stack's ceph-a (BlueStore: `make bench-fleet` restarts it so), three nights:
night 1 full, nights 2 and 3 incremental after 2 % of each volume's objects changed.
Each night is backed up four ways, one after the other:

- **Cairn**: a plan over all the volumes, run now, through the real API, scheduler and
  two worker processes (4 jobs each at once, `--jobs-per-worker`; production's settings
  otherwise), to the `local` target (ceph-a/backups);
- **Cinder backup**: Debian's `cinder-backup` with its Ceph driver, started by the bench
  with the stack's Cinder (incremental: RBD diffs, to the pool `cinder-backups`), every
  volume's backup requested at once, as a tenant's cron would;
- **Cinder backup with Cairn's driver**: the same cinder-backup with `cairn_cinder.backup`
  (Cairn's engine moves the data, Cinder's API is the tenant's), on a second set of
  volumes made and changed exactly as the first (the same seeds): Cinder's API picks an
  incremental's parent among the volume's backups whatever driver made them, and Cinder's
  Ceph driver cannot build on a backup of Cairn's. One cinder-backup runs at a time
  (tests/support/cinder_backup.py), started and proven by a probe backup before its night;
- **shell**: the per-volume sequence providers script today, one volume after the other:
  `rbd snap create`, `rbd export-diff [--from-snap] | rbd import-diff`, `rbd snap rm`.

It prints, per night and method: volumes per hour, wall time, CPU-seconds per volume (the
workers', cinder-backup's with its rbd children, the shell's children), and for Cairn the
median and p95 of each phase of its jobs (`timings.phases`) and the worker time of a job
(its phases after the claim), also less its two waits on the mon. Then the ratios the
issue asks for, each with both sides' concurrency beside it (Cairn's slots: workers x
jobs; cinder-backup's `backup_workers` x `backup_max_operations`).

    .venv/bin/python bench/fleet.py [--volumes 20] [--size-gib 1] [--fill 0.25]
                                    [--change 0.02] [--jobs-per-worker 10]
                                    [--backup-workers 1] [--backup-max-operations 15]
                                    [--driver-max-operations SLOTS]
                                    [--skip-cinder] [--skip-driver] [--skip-shell]
                                    [--mon-propose-interval 1.0] [--latency-ms 0]

Snapshot creates and removes wait for the mon's next proposal; the run sets the mon's
`paxos_propose_interval` to production's 1 s (the local stack's is 0.1 s) and puts it back.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import rbd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.latency import line
from services.settings import Settings
from tests.support import ceph, cinder_backup
from tests.support.cinder_backup import Concurrency
from tests.support.databases import migrated_database
from tests.support.openstack import (
    ADMIN_PROJECT,
    KEYSTONE,
    PASSWORD,
    OpenStackCairn,
    User,
    admin_cinder,
    cinder_volume,
    image_of,
    keystone_up,
    make_cloud,
    start_cairn,
)

MIB = 1 << 20
GIB = 1 << 30
OBJECT = 4 * MIB
REPO = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("CAIRN_STATE_DIR", REPO / ".state"))
CEPH_CONF = STATE / "ceph-a" / "ceph.conf"
CINDER_POOL = cinder_backup.CEPH_POOL
SHELL_POOL = "shell-backups"
CLK = os.sysconf("SC_CLK_TCK")
LOGS = STATE / "bench-fleet"
SUBMITTERS = 10
"""Cinder backups asked for at once (each a POST to Cinder's API)."""
"""cinder-backup's and Cairn's logs, kept after the run (its temporary directory is not)."""
PRODUCTION = ("progress_interval_seconds", "copy_window", "job_heartbeat_timeout_seconds",
              "lease_seconds", "reconcile_interval_seconds", "scheduler_tick_seconds",
              "job_redispatch_after_seconds", "target_probe_interval_seconds",
              "token_cache_seconds")
"""Settings the test stack shortens (a small copy window, short leases and heartbeats, fast
probes, tokens validated at Keystone every second): the bench sets them back to
production's defaults. Runs before 2026-11-26 kept the tests' 1 s token cache: the bench's
polling cost Keystone a validation a second (0.1-0.3 of a core) during Cairn's nights."""


@dataclass
class Night:
    method: str
    night: int
    volumes: int
    seconds: float
    cpu_seconds: float
    phases: dict[str, list[float]] = field(default_factory=dict)
    worker_seconds: list[float] = field(default_factory=list)
    own_seconds: list[float] = field(default_factory=list)
    """The worker time less the waits on the mon."""
    job_seconds: list[float] = field(default_factory=list)
    """From the claim to the end, as the job's timings say (started_at to finished_at)."""
    machine_seconds: float = 0.0
    """CPU-seconds of the whole machine over the night: every process of either side (the
    OSD, Keystone, Cinder's API, scheduler and volume service, RabbitMQ, Cairn's API...)."""

    @property
    def per_hour(self) -> float:
        return self.volumes * 3600 / self.seconds


def cpu_of(pid: int) -> float:
    """CPU-seconds of a process and its reaped children (utime, stime, cutime, cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / CLK


def machine_cpu() -> float:
    """CPU-seconds the machine has spent so far, every process and the kernel's work."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return sum(int(v) for v in fields[:3] + fields[5:7]) / CLK  # user to softirq, less idle, iowait


def ceph_cli(*args: str) -> str:
    return subprocess.run(["ceph", "-c", str(CEPH_CONF), *args], check=True,
                          capture_output=True, text=True).stdout


@contextmanager
def mon_propose_interval(seconds: float) -> Iterator[None]:
    """Every RBD snapshot create and remove waits for the mon's next proposal, which comes
    at most once per `paxos_propose_interval`: production's 1 s, where the local stack
    runs 0.1 s so that tests are quick. Set for the run, then put back."""
    before = json.loads(ceph_cli("tell", "mon.a", "config", "get", "paxos_propose_interval",
                                 "--format=json"))["paxos_propose_interval"]
    ceph_cli("tell", "mon.a", "config", "set", "paxos_propose_interval", str(seconds))
    try:
        yield
    finally:
        ceph_cli("tell", "mon.a", "config", "set", "paxos_propose_interval", str(before))


def ensure_pool(name: str) -> None:
    if name not in ceph_cli("osd", "pool", "ls").split():
        ceph_cli("osd", "pool", "create", name, "8")
        ceph_cli("osd", "pool", "application", "enable", name, "rbd")


WAITS = ("snapshot", "target_snapshot")
"""The phases in which a job waits for the mon's next proposal (its source snapshot, during
which the target side is opened too; its target snapshot)."""


# ---------------------------------------------------------------- the volumes
def make_volumes(member: User, n: int, size_gib: int, fill: float,
                 prefix: str = "fleet") -> list[str]:
    api = member.cinder()
    ids = [api.create(size_gb=size_gib, name=f"{prefix}-{i:03d}", volume_type=None,
                      description="bench/fleet.py", metadata={}).id for i in range(n)]
    for volume_id in ids:
        api.wait_for(volume_id, "available", 600)
    objects = size_gib * GIB // OBJECT

    def fill_one(args: tuple[int, str]) -> None:
        i, volume_id = args
        rng = random.Random(i)
        chosen = rng.sample(range(objects), max(1, int(objects * fill)))
        with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(volume_id)) as im:
            for index in chosen:
                im.write(rng.randbytes(OBJECT), index * OBJECT)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(fill_one, enumerate(ids)))
    return ids


def change(ids: list[str], size_gib: int, fraction: float, night: int) -> None:
    """Rewrite `fraction` of each volume's objects (4 KiB in each: what a day of small
    writes looks like to an incremental, which copies whole objects)."""
    objects = size_gib * GIB // OBJECT

    def one(args: tuple[int, str]) -> None:
        i, volume_id = args
        rng = random.Random(night * 100_000 + i)
        with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(volume_id)) as im:
            for index in rng.sample(range(objects), max(1, int(objects * fraction))):
                im.write(rng.randbytes(4096), index * OBJECT + rng.randrange(0, OBJECT, 4096))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, enumerate(ids)))


# ---------------------------------------------------------------- Cairn
def cairn_night(cairn: OpenStackCairn, token: str, plan_id: str, night: int,
                n: int) -> Night:
    workers = [p.proc.pid for p in cairn.processes
               if p.name.startswith("cairn-worker") and p.proc is not None]
    cpu0 = sum(cpu_of(pid) for pid in workers)
    machine0 = machine_cpu()
    t0 = time.monotonic()
    run = cairn.call("POST", f"/v1/plans/{plan_id}/run", token,
                     json={"kind": "full" if night == 1 else "incremental"})
    assert run.status_code == 202, run.text
    jobs = [cairn.wait_job(j["id"], token, timeout=7200) for j in run.json()["jobs"]]
    seconds = time.monotonic() - t0
    cpu = sum(cpu_of(pid) for pid in workers) - cpu0
    bad = [j for j in jobs if j["status"] != "succeeded"]
    assert not bad, bad[:2]
    result = Night("cairn", night, len(jobs), seconds, cpu,
                   machine_seconds=machine_cpu() - machine0)
    for job in jobs:
        phases = job["timings"]["phases"] or {}
        for name, value in phases.items():
            result.phases.setdefault(name, []).append(value)
        result.worker_seconds.append(sum(v for k, v in phases.items()
                                         if k not in ("queue_wait", "claim")))
        result.own_seconds.append(sum(v for k, v in phases.items()
                                      if k not in ("queue_wait", "claim", *WAITS)))
        result.job_seconds.append(job["timings"]["duration_seconds"] or 0.0)
    assert len(jobs) == n, f"{len(jobs)} jobs for {n} volumes"
    return result


# ---------------------------------------------------------------- Cinder backup
DRIVERS = {"cinder-backup": "Cinder's Ceph driver", "cinder+cairn": "Cairn's driver"}


def start_backup_service(method: str, directory: Path, cairn_url: str,
                         concurrency: Concurrency, member: User, probe: str
                         ) -> cinder_backup.BackupService:
    """cinder-backup with the method's driver, once Cinder has placed a probe backup on it
    and it succeeded (the scheduler places a backup only on a host whose state it has
    received; os-services says `up` before that)."""
    options = (cinder_backup.ceph_driver_options() if method == "cinder-backup" else
               cinder_backup.cairn_driver_options(cairn_url, username="n-admin",
                                                  password=PASSWORD, project=ADMIN_PROJECT,
                                                  auth_url=KEYSTONE))
    conf = cinder_backup.write_conf(directory / f"{method}.conf", options, concurrency)
    service = cinder_backup.start(conf, LOGS / f"{method}.log", concurrency)
    try:
        seconds = cinder_backup.wait_until_placeable(service, member.cinder(), probe)
    except BaseException:
        service.stop()
        raise
    print(f"# {method}: cinder-backup with {DRIVERS[method]} placeable after {seconds:.0f} s",
          flush=True)
    return service


def cinder_night(method: str, member: User, ids: list[str], night: int,
                 pids: list[int]) -> Night:
    """`pids`: whose CPU the night costs (cinder-backup; with Cairn's driver, Cairn's
    workers too, which move the data)."""
    api = member.cinder()
    cpu0 = sum(cpu_of(pid) for pid in pids)
    machine0 = machine_cpu()
    t0 = time.monotonic()

    def create(volume_id: str) -> str:
        body = {"backup": {"volume_id": volume_id, "name": f"night-{night}",
                           "incremental": night > 1}}
        answer = api.session.post("/backups", json=body, endpoint_filter=api.endpoint_filter,
                                  raise_exc=False)
        assert answer.status_code == 202, answer.text
        return str(answer.json()["backup"]["id"])

    # A night's backups are asked for at once, as a fleet's many tenants' scripts do, not
    # one POST after the other: Cinder's API takes a few hundred ms per POST on these two
    # cores, and asking in turn would bound the night by the client's patience.
    with ThreadPoolExecutor(max_workers=SUBMITTERS) as pool:
        made = list(pool.map(create, ids))
    print(f"#   {method}: {len(made)} backups asked for in {time.monotonic() - t0:.1f} s",
          flush=True)
    pending = set(made)
    while pending:
        time.sleep(0.5)
        # Two short listings a round (the backups still being made, and any failed), not a
        # GET per backup nor a detailed listing of all: at 200 volumes those cost Cinder's
        # API more CPU than the night's backups cost cinder-backup, on the cores both share.
        for status in ("error", "creating"):
            listed = api.session.get("/backups", params={"name": f"night-{night}",
                                                         "status": status},
                                     endpoint_filter=api.endpoint_filter).json()["backups"]
            ours = {backup["id"] for backup in listed} & pending
            if status == "error" and ours:
                failed = api.session.get(f"/backups/{min(ours)}",
                                         endpoint_filter=api.endpoint_filter).json()
                raise AssertionError(f"Cinder backup {min(ours)} failed: "
                                     f"{failed['backup'].get('fail_reason')}")
        pending = ours
    return Night(method, night, len(ids), time.monotonic() - t0,
                 sum(cpu_of(pid) for pid in pids) - cpu0,
                 machine_seconds=machine_cpu() - machine0)


# ---------------------------------------------------------------- the shell sequence
def shell_night(ids: list[str], night: int, size_gib: int) -> Night:
    conf = f"-c {CEPH_CONF}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    machine0 = machine_cpu()
    t0 = time.monotonic()
    for volume_id in ids:
        src = f"volumes/{image_of(volume_id)}"
        dst = f"{SHELL_POOL}/{image_of(volume_id)}"
        snap, prev = f"shell.{night}", f"shell.{night - 1}"
        steps = [f"rbd {conf} snap create {src}@{snap}"]
        if night == 1:
            steps.append(f"rbd {conf} create {dst} --size {size_gib}G")
            steps.append(f"rbd {conf} export-diff {src}@{snap} - | "
                         f"rbd {conf} import-diff - {dst}")
        else:
            steps.append(f"rbd {conf} export-diff --from-snap {prev} {src}@{snap} - | "
                         f"rbd {conf} import-diff - {dst}")
            steps.append(f"rbd {conf} snap rm {src}@{prev}")
        subprocess.run(" && ".join(steps), shell=True, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return Night("shell", night, len(ids), time.monotonic() - t0, cpu,
                 machine_seconds=machine_cpu() - machine0)


# ---------------------------------------------------------------- report
def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(results: list[Night], concurrency: dict[str, str]) -> None:
    print(f"\n{'night':>5} {'method':>14} {'volumes':>8} {'wall s':>8} {'vol/hour':>9} "
          f"{'CPU s/vol':>10} {'machine CPU s/vol':>18}")
    for r in results:
        print(f"{r.night:>5} {r.method:>14} {r.volumes:>8} {r.seconds:>8.1f} "
              f"{r.per_hour:>9.0f} {r.cpu_seconds / r.volumes:>10.2f} "
              f"{r.machine_seconds / r.volumes:>18.2f}")
    print("(CPU: the method's own processes; machine CPU: every process of the machine over "
          "the night, the services each side leans on included)")
    for r in results:
        if r.method != "cairn":
            continue
        print(f"\nCairn, night {r.night}: phases per job, median / p95 (s)")
        for name, values in r.phases.items():
            print(f"  {name:>16} {statistics.median(values):8.3f} {pct(values, 0.95):8.3f}")
        print(f"  {'worker time':>16} {statistics.median(r.worker_seconds):8.3f} "
              f"{pct(r.worker_seconds, 0.95):8.3f}   (a job's phases after its claim)")
        print(f"  {'less the waits':>16} {statistics.median(r.own_seconds):8.3f} "
              f"{pct(r.own_seconds, 0.95):8.3f}   (less {', '.join(WAITS)})")
        print(f"  {'job duration':>16} {statistics.median(r.job_seconds):8.3f} "
              f"{pct(r.job_seconds, 0.95):8.3f}   (started_at to finished_at)")
    by = {(r.method, r.night): r for r in results}
    print()
    for night in sorted({r.night for r in results if r.night > 1}):
        for over, under, goal in (("cairn", "cinder-backup", "3x"), ("cairn", "shell", "1.5x"),
                                  ("cinder+cairn", "cinder-backup", "2.5x at 200 volumes"),
                                  ("cinder+cairn", "cairn", "within 10 %")):
            a, b = by.get((over, night)), by.get((under, night))
            if a and b:
                print(f"night {night}: {over} / {under} = {a.per_hour / b.per_hour:.2f}x "
                      f"volumes per hour ({concurrency[over]} against {concurrency[under]}; "
                      f"goal {goal})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--volumes", type=int, default=20)
    parser.add_argument("--size-gib", type=int, default=1)
    parser.add_argument("--fill", type=float, default=0.25,
                        help="fraction of each volume's objects holding data")
    parser.add_argument("--change", type=float, default=0.02,
                        help="fraction of each volume's objects changed between nights")
    parser.add_argument("--nights", type=int, default=3)
    parser.add_argument("--jobs-per-worker", type=int, default=10,
                        help="each of the two workers' concurrency (CAIRN_WORKER_CONCURRENCY; "
                             "2 x 10 is the setting bench/README.md quotes)")
    parser.add_argument("--backup-workers", type=int, default=1,
                        help="cinder-backup's backup_workers (Cinder's default)")
    parser.add_argument("--backup-max-operations", type=int, default=15,
                        help="cinder-backup's backup_max_operations (Cinder's default)")
    parser.add_argument("--driver-max-operations", type=int, default=None,
                        help="backup_max_operations of the cinder-backup that runs Cairn's "
                             "driver (default: Cairn's slots; its operations only wait on "
                             "Cairn's jobs, docs/openstack.md)")
    parser.add_argument("--skip-cinder", action="store_true",
                        help="no cinder-backup with Cinder's Ceph driver")
    parser.add_argument("--skip-driver", action="store_true",
                        help="no cinder-backup with Cairn's driver")
    parser.add_argument("--skip-shell", action="store_true")
    parser.add_argument("--mon-propose-interval", type=float, default=1.0,
                        help="the mon's paxos_propose_interval for the run (production's "
                             "1 s; the local stack runs 0.1 s)")
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="one-way delay of a proxy put between every backup's Ceph "
                             "client (Cairn's workers, cinder-backup, the rbd tools) and the "
                             "OSD, as a network between hosts would (bench/latency/)")
    args = parser.parse_args()
    if args.driver_max_operations is None:
        args.driver_max_operations = 2 * args.jobs_per_worker
    if args.latency_ms:
        line.ensure_redirect_preloaded(STATE / "bench")
    if not keystone_up():
        sys.exit("Keystone is not running: `make bench-fleet` starts the stack with it")
    print(f"# fleet: {args.volumes} x {args.size_gib} GiB ({args.fill:.0%} data), "
          f"{args.change:.0%} changed per night; Cairn: 2 workers x {args.jobs_per_worker} "
          f"jobs; cinder-backup: {args.backup_workers} worker x {args.backup_max_operations} "
          f"operations ({args.driver_max_operations} with Cairn's driver); "
          f"mon paxos_propose_interval {args.mon_propose_interval:g} s; "
          f"{f'{args.latency_ms:g} ms each way to the OSD; ' if args.latency_ms else ''}"
          f"{platform.node()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}",
          flush=True)
    ensure_pool(CINDER_POOL)
    ensure_pool(SHELL_POOL)
    results: list[Night] = []
    with tempfile.TemporaryDirectory() as tmp, mon_propose_interval(args.mon_propose_interval):
        directory = Path(tmp)
        cloud = make_cloud(directory)
        member = cloud["a-member"]
        project = member.project_id
        admin = admin_cinder()
        admin.session.put(f"/os-quota-sets/{project}", endpoint_filter=admin.endpoint_filter,
                          json={"quota_set": {"volumes": -1, "gigabytes": -1, "backups": -1,
                                              "backup_gigabytes": -1, "snapshots": -1}})
        t0 = time.monotonic()
        ids = make_volumes(member, args.volumes, args.size_gib, args.fill)
        # Cinder's API picks an incremental's parent among the volume's backups, whatever
        # driver made them: Cairn's driver gets volumes of its own, the same bytes.
        driver_ids = ([] if args.skip_driver else
                      make_volumes(member, args.volumes, args.size_gib, args.fill, "fleet-d"))
        print(f"# {len(ids) + len(driver_ids)} volumes made and filled in "
              f"{time.monotonic() - t0:.0f} s", flush=True)
        # Every process started from here on (cinder-backup, Cairn, the rbd tools) talks
        # to the OSD through the delay line; the mon is reached directly.
        delay = line.injected_latency(args.latency_ms / 1000, [str(CEPH_CONF)]) \
            if args.latency_ms else contextlib.nullcontext()
        with delay:
            run_nights(args, directory, member, ids, driver_ids, results)
    slots = f"Cairn {2 * args.jobs_per_worker} slots (2 x {args.jobs_per_worker})"
    backup = (f"{args.backup_workers} x {args.backup_max_operations} "
              "(backup_workers x backup_max_operations)")
    driver = (f"{args.backup_workers} x {args.driver_max_operations} "
              "(backup_workers x backup_max_operations)")
    report(results, {"cairn": slots, "shell": "1 volume at a time",
                     "cinder-backup": f"cinder-backup {backup}",
                     "cinder+cairn": f"cinder-backup {driver} over {slots}"})
    print("\nThe volumes, their backups and the pools stay; `make down` and `make up` "
          "start a fresh stack.")


def run_nights(args: argparse.Namespace, directory: Path, member: User, ids: list[str],
               driver_ids: list[str], results: list[Night]) -> None:
    LOGS.mkdir(parents=True, exist_ok=True)
    concurrency = {"cinder-backup": Concurrency(args.backup_workers,
                                                args.backup_max_operations),
                   "cinder+cairn": Concurrency(args.backup_workers,
                                               args.driver_max_operations)}
    backups = [m for m, skip in (("cinder-backup", args.skip_cinder),
                                 ("cinder+cairn", args.skip_driver)) if not skip]
    with migrated_database("postgresql", directory) as url, \
            cinder_volume(member, "fleet-probe") as probe:
        slots = 2 * args.jobs_per_worker
        production = {f"CAIRN_{name.upper()}": str(Settings.model_fields[name].default)
                      for name in PRODUCTION}
        cairn = start_cairn(url, 7, LOGS / "cairn", workers=2, **production,
                            CAIRN_WORKER_CONCURRENCY=str(args.jobs_per_worker),
                            # One project backs the fleet up, every worker thread its own
                            # (alone on the target, it may hold every slot).
                            CAIRN_MAX_JOBS_PER_TARGET=str(slots),
                            CAIRN_MAX_JOBS_PER_PROJECT=str(slots))
        try:
            token = member.token()
            plan = cairn.call("POST", "/v1/plans", token, json={
                "name": "fleet", "volumes": ids,
                "rules": [{"cron": "0 2 * * *", "kind": "incremental"}],
                "retention": {"keep_last": 10}})
            assert plan.status_code == 201, plan.text
            for night in range(1, args.nights + 1):
                if night > 1:
                    change(ids, args.size_gib, args.change, night)
                    if driver_ids:
                        change(driver_ids, args.size_gib, args.change, night)
                results.append(cairn_night(cairn, member.token(), plan.json()["id"],
                                           night, len(ids)))
                print(f"# night {night}: cairn {results[-1].seconds:.1f} s", flush=True)
                for method in backups:
                    # One cinder-backup at a time (tests/support/cinder_backup.py): started
                    # for its night, proven by a probe backup, stopped after it.
                    service = start_backup_service(method, directory, cairn.url,
                                                   concurrency[method], member, probe)
                    workers = [p.proc.pid for p in cairn.processes
                               if p.name.startswith("cairn-worker") and p.proc is not None]
                    try:
                        results.append(cinder_night(
                            method, member, driver_ids if method == "cinder+cairn" else ids,
                            night, [service.proc.pid,
                                    *(workers if method == "cinder+cairn" else [])]))
                    finally:
                        service.stop()
                    print(f"# night {night}: {method} {results[-1].seconds:.1f} s",
                          flush=True)
                if not args.skip_shell:
                    results.append(shell_night(ids, night, args.size_gib))
                    print(f"# night {night}: shell {results[-1].seconds:.1f} s",
                          flush=True)
        finally:
            cairn.stop()


if __name__ == "__main__":
    main()
