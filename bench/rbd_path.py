"""Issue 33's acceptance, "bench figures of the RBD path within noise of before (same run)":
the RBD path timed on the code before the target seam and on this checkout, interleaved in
one run on the same servers; prints per job kind the seconds from submission to success,
the worker's CPU seconds and the job's own phases, before against after.

    make bench-rbd-path ARGS="--reps 5"
    .venv/bin/python bench/rbd_path.py [--before a7576ab] [--reps 5] [--volumes 3]
                                       [--size-mib 1024] [--dry-run]

"Before" is a git worktree of `--before` (default a7576ab, the commit before the seam) at
.state/bench/rbd-path/before (reused when it is at that commit); "after" is this checkout,
uncommitted changes included. Each tree runs its own cairn-api (over HTTP), cairn-worker
and cairn-scheduler: `python -c` on the tree's own modules with the tree as working
directory and PYTHONPATH (the venv's console scripts would import the installed editable
package, this checkout, for both), on a SQLite database of its own migrated by that
tree's `cairn-manage db upgrade`, and Redis database CAIRN_BENCH_REDIS_DB (3) for before,
the next one for after. Both stay up for the whole run; the jobs run one at a time.

A pass of one volume, on ceph-a's `volumes` pool and the `local` RBD target: a new image
with every other 4 MiB object written (deterministic data, the same for both trees and
every repetition), a full backup, 2 % of its objects rewritten, an incremental backup, a
restore of the incremental into a new image (removed at once), a verify of it, and the
deletion of both restore points; then the volume and its backup image are removed. One
pass of each tree first warms the processes up and is not counted; then repetition 1 of
before (every volume), repetition 1 of after, repetition 2 of before, and so on.

A job is timed from its submission to the API until a poll (every 50 ms) sees it
succeeded; the worker's CPU is its process's user and system time over that interval
(jobs run alone, so it is the job's, plus the worker's idle housekeeping). The verdict
for a kind is "within noise" when the median after / the median before lies inside the
before runs' own spread (their min and max over their median) or within 10 %.

Runs on the running stack's servers (`deploy/local/stack.sh up infra`: Redis and ceph-a);
the OSD is memstore, 4 GiB of RAM: one pass holds at most its volume, its backup image
and the restored copy, 1.5 x --size-mib of data at half written, so --size-mib is at most
1024. Everything made is removed at the end, also when a job fails (which ends the run:
the logs stay in .state/bench/rbd-path/run/). `--dry-run` builds the worktree, migrates
both databases and prints each process's command, directory and environment and where
each tree's modules resolve, starting no server."""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import rados
import rbd

from tests.support import ceph, janitor
from tests.support.ceph import MiB, conf_path
from tests.support.redis_server import free_port
from tests.support.stack import HEADERS, REDIS_PORT, REPO, STATE, Process, service_env

DEFAULT_BEFORE = "a7576ab"
"""The last commit before the target seam (services/targets/, the managers' split)."""
HOME = STATE / "bench" / "rbd-path"
OBJECT = 4 * MiB
"""RBD's default object size: what 'half written' and '2 % of objects changed' count."""
CHANGED = 0.02
MAX_SIZE_MIB = 1024
"""1.5 x this at half written is one pass's peak on the memstore OSD (4 GiB of RAM)."""
POLL_SECONDS = 0.05
JOB_TIMEOUT_SECONDS = 900.0
KINDS = ("full", "incremental", "restore", "verify", "delete")
TEST_SPEEDUPS = ("CAIRN_COPY_WINDOW", "CAIRN_PROGRESS_INTERVAL_SECONDS",
                 "CAIRN_TARGET_PROBE_INTERVAL_SECONDS", "CAIRN_JOB_HEARTBEAT_TIMEOUT_SECONDS",
                 "CAIRN_LEASE_SECONDS", "CAIRN_JOB_REDISPATCH_AFTER_SECONDS",
                 "CAIRN_RECONCILE_INTERVAL_SECONDS")
"""The test stacks' settings that shape a job's run (a copy window of 4, progress written
every 0.3 s): production's defaults here. The scheduler's 0.2 s tick stays, so admission
adds little to a job's time."""


class BenchError(RuntimeError):
    """A job that did not succeed, or a tree that would not start: the run ends."""


@dataclass
class Tree:
    label: str
    path: Path
    commit: str
    title: str
    redis_db: int
    database: Path
    api_port: int = field(default_factory=free_port)

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.database}"

    def env(self) -> dict[str, str]:
        """The test stacks' environment, on this tree's database and Redis database, with
        ceph-a's `local` target only and production's job timings."""
        env = service_env(
            self.database_url, self.redis_db,
            CAIRN_CLUSTERS=json.dumps({"ceph-a": {"conf": str(conf_path("ceph-a"))}}),
            CAIRN_BACKUP_TARGETS=json.dumps({"local": {"cluster": "ceph-a", "pool": "backups"}}),
            # No orphan scan may take the other tree's backup images for its own orphans.
            CAIRN_ORPHAN_DRY_RUN="true")
        env.pop("CAIRN_OBJECT_TARGETS", None)
        for made in json.loads(env.pop("CAIRN_DIRECTORY_TARGETS", "{}")).values():
            shutil.rmtree(made["path"], ignore_errors=True)  # service_env made it
        for name in TEST_SPEEDUPS:
            env.pop(name, None)
        env["PYTHONPATH"] = str(self.path)
        return env

    def processes(self, env: dict[str, str], logs: Path) -> list[tuple[Process, str]]:
        """Its cairn-api, cairn-worker and cairn-scheduler, each with its ready line."""
        def process(name: str, argv: list[str]) -> Process:
            return Process(f"{name} ({self.label})", argv, env,
                           logs / f"{self.label}-{name}.log", cwd=self.path)
        return [
            (process("cairn-api", [*entry("api.main", "run"), "--port", str(self.api_port)]),
             "Uvicorn running"),
            (process("cairn-worker", entry("worker.main", "main")), "ready"),
            (process("cairn-scheduler", entry("services.scheduler.main", "main")),
             "cairn-scheduler started"),
        ]

    def migrate(self, env: dict[str, str]) -> None:
        """`cairn-manage db upgrade` of this tree, on its own database."""
        done = subprocess.run([*entry("manage.main", "main"), "db", "upgrade"], check=False,
                              cwd=self.path, env={**os.environ, **env}, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise BenchError(f"{self.label}: cairn-manage db upgrade failed:\n"
                             f"{done.stdout}{done.stderr}"[-3000:])


def entry(module: str, function: str) -> list[str]:
    """What a console script runs, on the modules the working directory and PYTHONPATH
    find first (sys.argv[1:] are the arguments, as for the script)."""
    return [sys.executable, "-c", f"import sys; from {module} import {function}; "
                                  f"sys.exit({function}())"]


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def before_worktree(ref: str, home: Path = HOME) -> tuple[Path, str]:
    """A worktree of `ref` at `home`/before: the one there when it is at that commit, else
    moved to it, or made."""
    commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    path = home / "before"
    if (path / ".git").exists():
        if git("rev-parse", "HEAD", cwd=path) != commit:
            git("checkout", "--quiet", "--detach", commit, cwd=path)
    else:
        git("worktree", "prune")  # a worktree removed by hand stays registered until then
        path.parent.mkdir(parents=True, exist_ok=True)
        git("worktree", "add", "--quiet", "--detach", str(path), commit)
    return path, commit


def describe(path: Path) -> tuple[str, str]:
    commit = git("rev-parse", "HEAD", cwd=path)
    title = git("log", "-1", "--format=%h %s", cwd=path)
    if git("status", "--porcelain", "--untracked-files=no", cwd=path):
        title += " (with uncommitted changes)"
    return commit, title


@dataclass
class Sample:
    seconds: float
    cpu_seconds: float
    phases: dict[str, float]


@dataclass
class Cairn:
    """One tree's running processes and its API client."""

    tree: Tree
    worker: Process
    client: httpx.Client
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    recording: bool = False

    def worker_cpu(self) -> float:
        """User and system seconds of the worker process, all its threads."""
        assert self.worker.proc is not None
        stat = Path(f"/proc/{self.worker.proc.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()  # after the name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def job(self, kind: str, method: str, path: str,
            body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Submit, wait until it ended; record its figures under `kind` (when recording)."""
        cpu, started = self.worker_cpu(), time.monotonic()
        answer = self.client.request(method, path, json=body)
        if answer.status_code != 202:
            raise BenchError(f"{self.tree.label}: {method} {path} answered "
                             f"{answer.status_code}: {answer.text[:500]}")
        job_id = answer.json()["id"]
        while True:
            answer = self.client.get(f"/v1/jobs/{job_id}")
            if answer.status_code != 200:
                raise BenchError(f"{self.tree.label}: GET /v1/jobs/{job_id} answered "
                                 f"{answer.status_code}: {answer.text[:500]}")
            job: dict[str, Any] = answer.json()
            if job["status"] in ("succeeded", "failed", "cancelled"):
                break
            if time.monotonic() - started > JOB_TIMEOUT_SECONDS:
                raise BenchError(f"{self.tree.label}: {kind} job {job_id} still "
                                 f"{job['status']} after {JOB_TIMEOUT_SECONDS:.0f} s")
            time.sleep(POLL_SECONDS)
        seconds, cpu = time.monotonic() - started, self.worker_cpu() - cpu
        if job["status"] != "succeeded":
            raise BenchError(f"{self.tree.label}: {kind} job {job_id} {job['status']}: "
                             f"{job.get('error')}")
        if self.recording:
            self.samples.setdefault(kind, []).append(
                Sample(seconds, cpu, dict(job["timings"].get("phases") or {})))
        return job

    def restore_point(self, rp_id: str) -> dict[str, Any]:
        answer = self.client.get(f"/v1/restore-points/{rp_id}")
        answer.raise_for_status()
        rp: dict[str, Any] = answer.json()
        return rp


@contextmanager
def running(tree: Tree, logs: Path) -> Iterator[Cairn]:
    env = tree.env()
    tree.migrate(env)
    subprocess.run(["redis-cli", "-p", str(REDIS_PORT), "-n", str(tree.redis_db), "flushdb"],
                   check=True, capture_output=True)
    processes = tree.processes(env, logs)
    try:
        for process, _ in processes:
            process.launch()
        for process, ready in processes:
            process.wait_ready(ready, timeout=120)
        with httpx.Client(base_url=f"http://127.0.0.1:{tree.api_port}", headers=HEADERS,
                          timeout=60) as client:
            yield Cairn(tree, processes[1][0], client)
    finally:
        for process, _ in reversed(processes):
            process.stop()


def write_objects(image: rbd.Image, volume: int, objects: Sequence[int], version: str) -> None:
    for n in objects:
        data = random.Random(f"{volume}.{n}.{version}").randbytes(OBJECT)
        image.write(data, n * OBJECT)


def one_volume(cairn: Cairn, volumes: rados.Ioctx, backups: rados.Ioctx, name: str,
               volume: int, size: int) -> None:
    """A volume's pass: full, 2 % changed, incremental, restore, verify, delete both."""
    count = size // OBJECT
    written = list(range(0, count, 2))  # half written: every other object
    how_many = max(1, round(count * CHANGED))
    changed = written[::max(1, len(written) // how_many)][:how_many]  # spread over the image
    ref = f"ceph-a/volumes/{name}"
    restored = f"{name}-restored"
    backup_image = None
    rbd.RBD().create(volumes, name, size)
    try:
        with rbd.Image(volumes, name) as image:
            write_objects(image, volume, written, "v1")
        full = cairn.job("full", "POST", "/v1/backups",
                         {"volume": ref, "target": "local", "kind": "full"})
        backup_image = cairn.restore_point(full["restore_point_id"])["backup_image"]
        with rbd.Image(volumes, name) as image:
            write_objects(image, volume, changed, "v2")
        incremental = cairn.job("incremental", "POST", "/v1/backups",
                                {"volume": ref, "target": "local"})
        rp = cairn.restore_point(incremental["restore_point_id"])
        if rp["kind"] != "incremental":
            raise BenchError(f"{cairn.tree.label}: the second backup of {name} was "
                             f"{rp['kind']}: {rp.get('full_reason')}")
        cairn.job("restore", "POST", f"/v1/restore-points/{rp['id']}/restore",
                  {"target": restored})
        ceph.remove_image(volumes, restored)
        cairn.job("verify", "POST", f"/v1/restore-points/{rp['id']}/verify", {})
        cairn.job("delete", "DELETE", f"/v1/restore-points/{rp['id']}")
        cairn.job("delete", "DELETE", f"/v1/restore-points/{full['restore_point_id']}")
    finally:
        ceph.remove_image(volumes, restored)
        ceph.remove_image(volumes, name)
        if backup_image is not None:
            ceph.remove_image(backups, backup_image)


def verdict(before: list[float], after: list[float]) -> tuple[float, str]:
    """After / before of the medians, and whether that lies inside the before runs' own
    spread (their min and max over their median) or within 10 %."""
    middle = statistics.median(before)
    if middle <= 0:
        return float("nan"), "(no before figure to compare with)"
    ratio = statistics.median(after) / middle
    if min(before) / middle <= ratio <= max(before) / middle or abs(ratio - 1) <= 0.10:
        return ratio, "within noise"
    return ratio, "slower" if ratio > 1 else "faster"


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} ({min(values):.2f}-{max(values):.2f})"


def report(before: Cairn, after: Cairn) -> None:
    figures: list[tuple[str, Callable[[Sample], float]]] = [
        ("seconds from submission to succeeded", lambda s: s.seconds),
        ("worker CPU seconds per job", lambda s: s.cpu_seconds)]
    for title, pick in figures:
        print(f"\n{title} (median (min-max) over the jobs of every repetition):")
        print(f"  {'kind':<12} {'n':>3}  {'before':<22} {'after':<22} {'after/before':>12}  "
              "verdict")
        for kind in KINDS:
            b = [pick(s) for s in before.samples.get(kind, [])]
            a = [pick(s) for s in after.samples.get(kind, [])]
            if not b or not a:
                continue
            ratio, word = verdict(b, a)
            print(f"  {kind:<12} {len(b):>3}  {spread(b):<22} {spread(a):<22} {ratio:>12.3f}  "
                  f"{word}")
    print("\nthe jobs' own phases (median seconds; the phases both trees record):")
    for kind in KINDS:
        b_samples, a_samples = before.samples.get(kind, []), after.samples.get(kind, [])
        phases = [p for p in (b_samples[0].phases if b_samples else {})
                  if all(p in s.phases for s in (*b_samples, *a_samples))]
        if not phases or not a_samples:
            continue
        cells = []
        for phase in phases:
            then = statistics.median(s.phases[phase] for s in b_samples)
            now = statistics.median(s.phases[phase] for s in a_samples)
            cells.append(f"{phase} {then:.2f} -> {now:.2f}")
        print(f"  {kind:<12} " + ", ".join(cells))


def dry_run(trees: list[Tree]) -> None:
    for tree in trees:
        env = tree.env()
        tree.migrate(env)
        print(f"\n{tree.label}: {tree.title}\n  tree {tree.path}\n  database "
              f"{tree.database_url} (migrated by the tree's cairn-manage)\n  env: "
              + " ".join(f"{k}={v}" for k, v in sorted(env.items())
                         if k.startswith("CAIRN_") or k == "PYTHONPATH"))
        for process, ready in tree.processes(env, HOME / "run"):
            print(f"  {process.name}: cd {process.cwd} && {shlex.join(process.argv)}  "
                  f"(ready at {ready!r})")
        where = subprocess.run(
            [sys.executable, "-c", "import importlib.util as u; print(' '.join("
             "u.find_spec(m).origin for m in ('api.main', 'worker.main', "
             "'services.scheduler.main', 'manage.main', 'migrations')))"],
            cwd=tree.path, env={**os.environ, **env}, check=True, capture_output=True,
            text=True).stdout.split()
        print("  modules resolve to: " + ", ".join(where))
        if not all(Path(p).is_relative_to(tree.path) for p in where):
            raise BenchError(f"{tree.label}: a module resolves outside {tree.path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=DEFAULT_BEFORE, metavar="REF",
                        help=f"the code before (default {DEFAULT_BEFORE}); after is this "
                             "checkout")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of each tree")
    parser.add_argument("--volumes", type=int, default=3, help="volumes per repetition")
    parser.add_argument("--size-mib", type=int, default=MAX_SIZE_MIB,
                        help=f"each volume's size, half written (a multiple of 8, at most "
                             f"{MAX_SIZE_MIB})")
    parser.add_argument("--dry-run", action="store_true",
                        help="build the worktree, migrate both databases, print each "
                             "process's command and environment; start nothing")
    args = parser.parse_args()
    if args.size_mib % 8 or not 8 <= args.size_mib <= MAX_SIZE_MIB:
        parser.error(f"--size-mib must be a multiple of 8 from 8 to {MAX_SIZE_MIB}: a pass "
                     "holds 1.5 x that on the memstore OSD")
    if args.reps < 1 or args.volumes < 1:
        parser.error("--reps and --volumes must be at least 1")

    before_path, _ = before_worktree(args.before)
    run_dir = HOME / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    redis_db = int(os.environ.get("CAIRN_BENCH_REDIS_DB", "3"))
    trees = [Tree(label, path, *describe(path), redis_db + n, run_dir / f"{label}.db")
             for n, (label, path) in enumerate((("before", before_path), ("after", REPO)))]
    if args.dry_run:
        dry_run(trees)
        return

    size = args.size_mib * MiB
    print(f"rbd path: before {trees[0].title}; after {trees[1].title}; {args.reps} "
          f"repetitions x {args.volumes} volumes of {args.size_mib} MiB, half written, "
          f"{CHANGED:.0%} changed; {os.cpu_count()} cores, {platform.node()}; "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC", flush=True)
    tag = f"bench-rbd-{os.getpid()}"
    started = time.monotonic()
    try:
        with ExitStack() as stack:
            volumes = stack.enter_context(ceph.ioctx("ceph-a", "volumes"))
            backups = stack.enter_context(ceph.ioctx("ceph-a", "backups"))
            before, after = (stack.enter_context(running(tree, run_dir)) for tree in trees)
            for cairn in (before, after):
                t0 = time.monotonic()
                one_volume(cairn, volumes, backups, f"{tag}-{cairn.tree.label}-warm", 0, size)
                cairn.recording = True
                print(f"warm-up {cairn.tree.label}: {time.monotonic() - t0:.1f} s", flush=True)
            for rep in range(1, args.reps + 1):
                for cairn in (before, after):
                    t0 = time.monotonic()
                    for n in range(args.volumes):
                        one_volume(cairn, volumes, backups,
                                   f"{tag}-{cairn.tree.label}-r{rep}-v{n}", n, size)
                    print(f"repetition {rep} {cairn.tree.label}: "
                          f"{time.monotonic() - t0:.1f} s", flush=True)
            report(before, after)
    except BenchError as exc:
        print(f"bench-rbd-path: {exc}\n(logs: {run_dir})", file=sys.stderr)
        sys.exit(1)
    finally:
        left = [what for tree in trees for what in janitor.release(tree.database_url)]
        with ceph.ioctx("ceph-a", "volumes") as volumes:
            for name in ceph.image_names(volumes):
                if name.startswith(tag):
                    ceph.remove_image(volumes, name)
        if left:
            print("left in the backup pool (remove by hand): " + "; ".join(left),
                  file=sys.stderr)
    print(f"\n{time.monotonic() - started:.0f} s in all; logs in {run_dir}")


if __name__ == "__main__":
    main()
