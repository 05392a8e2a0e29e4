"""Copy-engine benchmark: Cairn's engine against the rbd tools, on two local BlueStore
micro clusters, in one run.

    make bench                       # or: .venv/bin/python bench/copy_engine.py [--size-gib 4]

Starts its own clusters `bench-a` / `bench-b` (BlueStore on a file, loopback ports 31891 /
31892, data in .state/bench/) so the figures do not depend on the test stack, makes a
deterministic image (dense, and 50 %-sparse), then runs every method `--reps` times,
interleaved (rep 1 of all methods, then rep 2, ...) so drift hits all of them alike, and
prints medians with min-max, CPU-seconds per GiB of the copying process(es), and ratios to
the anchors, and a QoS run printing its achieved rate per 1 s and 10 s. Then the core set
again with latency injected: every client connection to the OSDs, the rbd tools' and
Cairn's alike, passes through a delay line (`bench/latency/`: a proxy and a connect()
redirect preloaded into the processes).

Cairn's runs use the worker's own engine, extents and manifest code (the backup and restore
managers' copy, without the database around it): plan from diff_iterate, copy with the
window, checksum every object, store the manifest, snapshot the backup image."""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import rados
import rbd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.latency import line  # noqa: E402
from worker.engine import manifest  # noqa: E402
from worker.engine.copy import CopyEngine, CopyStats, Digests  # noqa: E402
from worker.engine.extents import allocated_objects, changed_objects, plan_chunks  # noqa: E402
from worker.engine.qos import Pacer  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
OBJECT = 4 * MiB
STATE = REPO / ".state" / "bench"
CLUSTERS = {"bench-a": 31891, "bench-b": 31892}
CHANGED_FRACTION = 0.05
SNAPSHOT_SECONDS: list[float] = []
"""Time each backup snapshot took: a fixed cost (the mon allocates the snapshot id at its
next proposal, up to `paxos_propose_interval` = 1 s later), kept out of the copy rates and
reported on its own; `rbd cp` and `export | import` make no snapshot at all."""


# --- clusters -------------------------------------------------------------------------

def conf_of(cluster: str) -> str:
    return str(STATE / cluster / "ceph.conf")


def ceph_sh(action: str, cluster: str, store_bytes: int) -> None:
    if action == "start":  # a fresh cluster each run: the figures start from an empty store
        ceph_sh("stop", cluster, 0)
        shutil.rmtree(STATE / cluster, ignore_errors=True)
    env = {**os.environ, "CAIRN_STATE_DIR": str(STATE), "CEPH_OBJECTSTORE": "bluestore",
           "CEPH_STORE_BYTES": str(store_bytes),
           # Ceph's default, as in production: every snapshot waits up to 1 s for the mon.
           "CEPH_PAXOS_PROPOSE_INTERVAL": "1"}
    subprocess.run(["bash", str(REPO / "deploy/local/ceph.sh"), action, cluster,
                    str(CLUSTERS[cluster])], check=True, env=env)


@dataclass
class Client:
    """One librados connection per cluster. Made while `injected_latency` is active, its
    connections to the OSDs go through the delay proxy."""

    handles: dict[str, rados.Rados] = field(default_factory=dict)

    def rados_conf(self) -> dict[str, str]:
        # Cairn's clients as its workers connect (services/storage/ceph.py).
        return {"rbd_disable_zero_copy_writes": "false"}

    def rbd_args(self, cluster: str) -> list[str]:
        # The rbd tools as users run them: Ceph's defaults (zero-copy writes off).
        return ["rbd", "-c", conf_of(cluster), "--no-progress"]

    @contextmanager
    def ioctx(self, cluster: str, pool: str) -> Iterator[rados.Ioctx]:
        if cluster not in self.handles:
            handle = rados.Rados(conffile=conf_of(cluster), conf=self.rados_conf())
            handle.connect(timeout=30)
            self.handles[cluster] = handle
        io = self.handles[cluster].open_ioctx(pool)
        try:
            yield io
        finally:
            io.close()

    def close(self) -> None:
        for handle in self.handles.values():
            handle.shutdown()


# --- injected latency -----------------------------------------------------------------

def injected_latency(delay: float) -> Iterator[subprocess.Popen[str]]:
    """While active, new Ceph client connections to the OSDs of both clusters (this
    process's and the rbd tools') pass through a delay line of `delay` seconds each way."""
    return line.injected_latency(delay, [conf_of(cluster) for cluster in CLUSTERS])


def process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- measuring ------------------------------------------------------------------------

def _cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@dataclass
class Run:
    seconds: float
    cpu: float
    moved: int
    """Bytes the run stands for: logical size for a full, changed bytes for an incremental."""
    copied: int
    """Bytes actually read and copied (data, not holes)."""


def run_shell(script: str, moved: int, copied: int) -> Run:
    cpu0, t0 = _cpu_children(), time.monotonic()
    with (STATE / "rbd-cli.log").open("a") as log:
        subprocess.run(["bash", "-o", "pipefail", "-c", script], check=True,
                       stdout=subprocess.DEVNULL, stderr=log)
    return Run(time.monotonic() - t0, _cpu_children() - cpu0, moved, copied)


def quote(args: list[str]) -> str:
    return " ".join(args)


# --- images ---------------------------------------------------------------------------

def remove_image(io: rados.Ioctx, name: str) -> None:
    try:
        with rbd.Image(io, name) as image:
            for snap in image.list_snaps():
                if image.is_protected_snap(snap["name"]):
                    image.unprotect_snap(snap["name"])
                image.remove_snap(snap["name"])
        rbd.RBD().remove(io, name)
    except rbd.ImageNotFound:
        pass
    for obj in list(io.list_objects()):
        if obj.key.startswith(f"cairn.manifest.{name}"):
            io.remove_object(obj.key)


def write_objects(image: rbd.Image, indexes: list[int], salt: int) -> None:
    """Deterministic random data into whole objects, 16 writes in flight."""
    def one(index: int) -> None:
        image.write(random.Random(salt * 1_000_003 + index).randbytes(OBJECT), index * OBJECT)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, indexes))


def make_source(io: rados.Ioctx, name: str, size: int, *, sparse: bool, seed: int) -> int:
    """Deterministic image: random data in every object (dense) or in half of them, in
    runs (sparse); snapshot s1; then CHANGED_FRACTION of the objects rewritten, a few
    discarded; snapshot s2. Returns the bytes changed between s1 and s2."""
    remove_image(io, name)
    rbd.RBD().create(io, name, size, order=22)
    objects = size // OBJECT
    rng = random.Random(seed)
    filled = [i for i in range(objects) if not sparse or (i // 8) % 2 == 0]
    with rbd.Image(io, name) as image:
        write_objects(image, filled, seed)
        image.create_snap("s1")
        changed = rng.sample(range(objects), max(1, int(objects * CHANGED_FRACTION)))
        for index in changed[: len(changed) // 10]:
            image.discard(index * OBJECT, OBJECT)
        write_objects(image, changed[len(changed) // 10:], seed + 7)
        image.create_snap("s2")
    return len(changed) * OBJECT


def make_thin_source(io: rados.Ioctx, name: str, size: int, seed: int) -> int:
    """A large thin image for the incremental at scale: data in the CHANGED_FRACTION of
    the objects that will change and as many others; s1; the first ones rewritten; s2.
    Returns the bytes changed."""
    remove_image(io, name)
    rbd.RBD().create(io, name, size, order=22)
    objects = size // OBJECT
    rng = random.Random(seed)
    picked = rng.sample(range(objects), 2 * int(objects * CHANGED_FRACTION))
    changed = picked[: len(picked) // 2]
    with rbd.Image(io, name) as image:
        write_objects(image, picked, seed)
        image.create_snap("s1")
        write_objects(image, changed, seed + 7)
        image.create_snap("s2")
    return len(changed) * OBJECT


def data_bytes(io: rados.Ioctx, name: str, snap: str) -> int:
    with rbd.Image(io, name, snapshot=snap, read_only=True) as image:
        return len(allocated_objects(image, image.size(), OBJECT)) * OBJECT


# --- Cairn ----------------------------------------------------------------------------

def cairn_copy(src_io: rados.Ioctx, src: str, snap: str, dst_io: rados.Ioctx, dst: str, *,
               window: int, since: str | None = None, base: manifest.Manifest | None = None,
               verify: manifest.Manifest | None = None, pacer: Pacer | None = None,
               on_progress: Callable[[CopyStats], None] | None = None,
               ) -> tuple[CopyStats, manifest.Manifest | None]:
    """What a backup (verify=None) or restore (verify=manifest) does with the data."""
    with rbd.Image(src_io, src, snapshot=snap, read_only=True) as source:
        size, order = source.size(), source.stat()["order"]
        object_size = 1 << order
        fresh = since is None
        if fresh:
            rbd.RBD().create(dst_io, dst, size, order=order)
        with rbd.Image(dst_io, dst) as target:
            if target.size() != size:
                target.resize(size)
            only = None
            if since is not None:
                only = (changed_objects(source, size, object_size, since)
                        | changed_objects(target, size, object_size, since))
            chunks = plan_chunks(size, object_size,
                                 allocated_objects(source, size, object_size),
                                 set() if fresh else allocated_objects(target, size, object_size),
                                 only=only)
            record: Digests = {}
            engine = CopyEngine(window=window, pacer=pacer, on_progress=on_progress)
            # A new image's objects are marked up front, as in a backup's first copy and a
            # restore into a new image (worker/managers/backup.py, restore.py).
            stats = engine.run(source, target, chunks, record=record, verify=verify,
                               new_target_pool=dst_io if fresh else None)
            target.flush()
            result = None
            if verify is None:
                result = (base or manifest.Manifest(object_size, size)).updated(record, size)
                manifest.store(dst_io, f"cairn.manifest.{dst}.{snap}", result)
                t0 = time.monotonic()
                target.create_snap(snap)
                SNAPSHOT_SECONDS.append(time.monotonic() - t0)
    return stats, result


# --- the benchmark --------------------------------------------------------------------

@dataclass
class Bench:
    client: Client
    size: int
    window: int
    changed: int = 0
    data: int = 0
    results: dict[str, list[Run]] = field(default_factory=dict)

    def add(self, method: str, run: Run) -> None:
        self.results.setdefault(method, []).append(run)
        rate = run.moved / MiB / run.seconds
        print(f"    {method:<34} {rate:8.0f} MiB/s  {run.seconds:6.2f} s  "
              f"cpu {run.cpu / max(run.copied, 1) * GiB:5.2f} s/GiB", flush=True)

    def rbd(self, cluster: str, *args: str) -> str:
        return quote(self.client.rbd_args(cluster) + list(args))

    def rep(self, src: str, methods: list[str]) -> None:
        c = self.client
        with c.ioctx("bench-a", "volumes") as vols, c.ioctx("bench-a", "backups") as bk, \
                c.ioctx("bench-b", "backups") as remote:
            for method in methods:
                getattr(self, "m_" + method)(src, vols, bk, remote)

    # anchors
    def m_rbd_cp(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx, _r: rados.Ioctx) -> None:
        self.add("rbd cp", run_shell(self.rbd("bench-a", "cp", f"volumes/{src}@s1",
                                              "backups/anchor"), self.size, self.data))
        remove_image(bk, "anchor")

    def m_rbd_deep_cp(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx,
                      _r: rados.Ioctx) -> None:
        self.add("rbd deep cp", run_shell(self.rbd("bench-a", "deep", "cp", f"volumes/{src}@s1",
                                                   "backups/anchor"), self.size, self.data))
        remove_image(bk, "anchor")

    def m_export_import(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx,
                        _r: rados.Ioctx) -> None:
        script = (self.rbd("bench-a", "export", f"volumes/{src}@s1", "-") + " | "
                  + self.rbd("bench-a", "import", "-", "backups/anchor"))
        self.add("rbd export | rbd import", run_shell(script, self.size, self.data))
        remove_image(bk, "anchor")

    def m_export_import_one_op(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx,
                               _r: rados.Ioctx) -> None:
        """The pipe with one operation in flight on each side, as the issue's latency goal
        pictures it. On Pacific both tools keep rbd_concurrent_management_ops (10) in
        flight by default; this shows what that default is worth."""
        one = ["--rbd-concurrent-management-ops", "1"]
        script = (self.rbd("bench-a", *one, "export", f"volumes/{src}@s1", "-") + " | "
                  + self.rbd("bench-a", *one, "import", "-", "backups/anchor"))
        self.add("rbd export | rbd import (1 op)", run_shell(script, self.size, self.data))
        remove_image(bk, "anchor")

    def _export_diff(self, src: str, bk: rados.Ioctx, *, time_full: bool) -> None:
        """export-diff | import-diff of s1 (timed, or set-up for the incremental), then of
        s1..s2 onto it (timed)."""
        rbd.RBD().create(bk, "anchor", self.size, order=22)
        full = run_shell(self.rbd("bench-a", "export-diff", f"volumes/{src}@s1", "-") + " | "
                         + self.rbd("bench-a", "import-diff", "-", "backups/anchor"),
                         self.size, self.data)
        if time_full:
            self.add("export-diff | import-diff (full)", full)
        script = (self.rbd("bench-a", "export-diff", "--from-snap", "s1", f"volumes/{src}@s2",
                           "-") + " | " + self.rbd("bench-a", "import-diff", "-",
                                                   "backups/anchor"))
        self.add("export-diff | import-diff (incr.)",
                 run_shell(script, self.changed, self.changed))
        remove_image(bk, "anchor")

    def m_export_diff(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx,
                      _r: rados.Ioctx) -> None:
        self._export_diff(src, bk, time_full=True)

    def m_export_diff_incr_only(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx,
                                _r: rados.Ioctx) -> None:
        """The incremental anchor alone: its base (a full export-diff) is set-up, not timed."""
        self._export_diff(src, bk, time_full=False)

    # Cairn
    def _cairn(self, method: str, fn: Callable[[], tuple[CopyStats, object]],
               moved: int) -> tuple[CopyStats, object]:
        cpu0, t0, snaps = _cpu_self(), time.monotonic(), len(SNAPSHOT_SECONDS)
        stats, extra = fn()
        elapsed, cpu = time.monotonic() - t0, _cpu_self() - cpu0
        snapshot = sum(SNAPSHOT_SECONDS[snaps:])
        self.add(method, Run(elapsed - snapshot, cpu, moved, stats.bytes_read))
        if snapshot:  # import-diff's figures include its end snapshot: compare like with like
            self.add(f"{method} + snapshot", Run(elapsed, cpu, moved, stats.bytes_read))
        return stats, extra

    def _cairn_full(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx) -> manifest.Manifest:
        _, full = self._cairn("Cairn full", lambda: cairn_copy(
            vols, src, "s1", bk, "cairn-bk", window=self.window), self.size)
        assert isinstance(full, manifest.Manifest)
        return full

    def _cairn_incremental(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx,
                           full: manifest.Manifest) -> None:
        stats, _ = self._cairn("Cairn incremental", lambda: cairn_copy(
            vols, src, "s2", bk, "cairn-bk", window=self.window, since="s1", base=full),
            self.changed)
        if stats.bytes_read > self.changed * 1.01:
            print(f"    !! incremental read {stats.bytes_read} bytes for {self.changed} changed")
        self.results.setdefault("incr. bytes read / changed", []).append(
            Run(1.0, 0.0, stats.bytes_read, stats.bytes_read))

    def _cairn_restore(self, vols: rados.Ioctx, bk: rados.Ioctx,
                       full: manifest.Manifest) -> None:
        self._cairn("Cairn restore", lambda: cairn_copy(
            bk, "cairn-bk", "s1", vols, "cairn-restored", window=self.window, verify=full),
            self.size)
        remove_image(vols, "cairn-restored")

    def m_cairn(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx, _r: rados.Ioctx) -> None:
        """Full, then incremental onto it, then restore of the full: a backup chain."""
        full = self._cairn_full(src, vols, bk)
        self._cairn_incremental(src, vols, bk, full)
        self._cairn_restore(vols, bk, full)
        remove_image(bk, "cairn-bk")

    def m_cairn_full(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx,
                     _r: rados.Ioctx) -> None:
        self._cairn_restore(vols, bk, self._cairn_full(src, vols, bk))
        remove_image(bk, "cairn-bk")

    def m_cairn_incr_only(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx,
                          _r: rados.Ioctx) -> None:
        """The incremental alone: its base (a full) is set-up, not timed."""
        _, full = cairn_copy(vols, src, "s1", bk, "cairn-bk", window=self.window)
        assert isinstance(full, manifest.Manifest)
        self._cairn_incremental(src, vols, bk, full)
        remove_image(bk, "cairn-bk")

    def m_cairn_cross(self, src: str, vols: rados.Ioctx, bk: rados.Ioctx,
                      remote: rados.Ioctx) -> None:
        self._cairn("Cairn cross-cluster", lambda: cairn_copy(
            vols, src, "s1", remote, "cairn-bk", window=self.window), self.size)
        remove_image(remote, "cairn-bk")


def median_line(runs: list[Run]) -> tuple[float, float, float, float]:
    rates = [r.moved / MiB / r.seconds for r in runs]
    cpu = [r.cpu / max(r.copied, 1) * GiB for r in runs]
    return statistics.median(rates), min(rates), max(rates), statistics.median(cpu)


def report(title: str, bench: Bench, ratios: list[tuple[str, str, float]]) -> None:
    print(f"\n## {title}\n")
    print("| method | MiB/s median | min-max | CPU-s/GiB copied |")
    print("|---|---:|---:|---:|")
    med: dict[str, float] = {}
    for method, runs in bench.results.items():
        if method.startswith("incr. bytes"):
            continue
        m, lo, hi, cpu = median_line(runs)
        med[method] = m
        print(f"| {method} | {m:.0f} | {lo:.0f}-{hi:.0f} | {cpu:.2f} |")
    read = bench.results.get("incr. bytes read / changed")
    if read:
        print(f"\nIncremental bytes read / changed bytes: "
              f"{statistics.median(r.moved for r in read) / bench.changed:.3f}")
    print()
    for what, anchor, goal in ratios:
        if what in med and anchor in med:
            ratio = med[what] / med[anchor]
            verdict = "ok" if ratio >= goal else "BELOW GOAL"
            print(f"- {what} / {anchor}: **{ratio:.2f}x** (goal >= {goal}x) {verdict}")


def single_op_latency(client: Client) -> tuple[float, float, float]:
    """Median ms of one 4 MiB write to a new object (librbd first marks it in the object
    map: two round trips), one 4 MiB overwrite and one 4 MiB read, with nothing else in
    flight."""
    with client.ioctx("bench-a", "backups") as io:
        remove_image(io, "latency-probe")
        rbd.RBD().create(io, "latency-probe", 16 * OBJECT, order=22)
        data = random.Random(3).randbytes(OBJECT)
        times: dict[str, list[float]] = {"new": [], "over": [], "read": []}
        with rbd.Image(io, "latency-probe") as image:
            image.write(data, 15 * OBJECT)  # takes the exclusive lock, outside the figures
            for kind, spent in times.items():
                for n in range(15):
                    t0 = time.monotonic()
                    if kind == "read":
                        image.read(n * OBJECT, OBJECT)
                    else:
                        image.write(data, n * OBJECT)
                    spent.append(time.monotonic() - t0)
        remove_image(io, "latency-probe")
    new, over, read = (statistics.median(times[k]) * 1e3 for k in ("new", "over", "read"))
    return new, over, read


def latency_line(client: Client) -> str:
    new, over, read = single_op_latency(client)
    return (f"write to a new object {new:.1f} ms, overwrite {over:.1f} ms, "
            f"read {read:.1f} ms")


def qos_run(client: Client, src: str, size: int, window: int, limit: int) -> None:
    print(f"\n## QoS: Cairn full limited to {limit / MiB:.0f} MiB/s\n")
    samples: list[tuple[float, int]] = []

    def on_progress(stats: CopyStats) -> None:
        # From the engine's start: the plan and image creation before it are not paced.
        samples.append((time.monotonic() - stats.started, stats.bytes_done))

    with client.ioctx("bench-a", "volumes") as vols, client.ioctx("bench-a", "backups") as bk:
        remove_image(bk, "cairn-qos")
        cairn_copy(vols, src, "s1", bk, "cairn-qos", window=window,
                   pacer=Pacer(limit, None), on_progress=on_progress)
        remove_image(bk, "cairn-qos")
    end = samples[-1][0]

    def done_at(t: float) -> int:
        return max((b for s, b in samples if s <= t), default=0)

    for span in (1, 10):
        windows = [(done_at(s + span) - done_at(s)) / span / limit
                   for s in range(0, int(end) - span + 1)]
        if not windows:
            continue
        goal = ("every one within 0.98-1.02" if span == 10 else "none above 1.10")
        ok = (all(0.98 <= w <= 1.02 for w in windows) if span == 10
              else max(windows) <= 1.10)
        print(f"- {span:>2} s windows ({len(windows)}): achieved/limit min {min(windows):.3f}, "
              f"max {max(windows):.3f} (goal: {goal}) {'ok' if ok else 'OUTSIDE GOAL'}")
    per_second = [f"{(done_at(s + 1) - done_at(s)) / MiB:.0f}" for s in range(int(end))]
    print(f"- MiB per second: {' '.join(per_second)}")


def window_sweep(client: Client, size: int, windows: list[int], reps: int) -> None:
    """Cairn full at several windows, interleaved: how the default window was chosen."""
    print(f"\n## Window sweep: Cairn full, dense {size / GiB:.1f} GiB\n")
    rates: dict[int, list[float]] = {w: [] for w in windows}
    with client.ioctx("bench-a", "volumes") as vols, client.ioctx("bench-a", "backups") as bk:
        make_source(vols, "sweep", size, sparse=False, seed=5)
        for _ in range(reps):
            for window in windows:
                remove_image(bk, "cairn-sweep")
                t0 = time.monotonic()
                cairn_copy(vols, "sweep", "s1", bk, "cairn-sweep", window=window)
                rates[window].append(size / MiB / (time.monotonic() - t0))
        remove_image(bk, "cairn-sweep")
        remove_image(vols, "sweep")
    print("| window | MiB/s median | min-max | memory bound |")
    print("|---:|---:|---:|---:|")
    for window, values in rates.items():
        print(f"| {window} | {statistics.median(values):.0f} | {min(values):.0f}-"
              f"{max(values):.0f} | {window * 4} MiB |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-gib", type=float, default=4.0)
    parser.add_argument("--latency-size-gib", type=float, default=2.0)
    parser.add_argument("--incr-size-gib", type=float, default=64.0,
                        help="thin image of the incremental-at-scale runs (5 %% changes)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.02,
                        help="one-way delay (s) of the latency runs' proxy in front of the OSDs")
    parser.add_argument("--qos-mib", type=int, default=150)
    parser.add_argument("--keep", action="store_true", help="leave the clusters running")
    parser.add_argument("--qos-only", action="store_true", help="only the QoS run")
    parser.add_argument("--latency-only", action="store_true",
                        help="only the runs with injected latency")
    parser.add_argument("--sweep-only", action="store_true",
                        help="only the window sweep (1, 4, 8, 16, 32) on the dense image")
    args = parser.parse_args()
    line.ensure_redirect_preloaded(STATE)
    size = int(args.size_gib * GiB) // OBJECT * OBJECT
    lat_size = int(args.latency_size_gib * GiB) // OBJECT * OBJECT
    incr_size = int(args.incr_size_gib * GiB) // OBJECT * OBJECT

    print(f"# Copy engine benchmark, {time.strftime('%Y-%m-%d')}\n")
    ceph_version = subprocess.run(["ceph", "--version"], check=True, capture_output=True,
                                  text=True).stdout.split()[2]
    print(f"Machine: {platform.node()}, {os.cpu_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / GiB:.0f} GiB RAM, "
          f"{platform.platform()}; Ceph {ceph_version}; "
          f"BlueStore on a file, one OSD per cluster; window {args.window}, 4 MiB objects; "
          f"{args.reps} interleaved repetitions.")
    store = int(max(3.5 * size, 0.6 * incr_size) + 2 * lat_size + 8 * GiB)
    for cluster in CLUSTERS:
        ceph_sh("start", cluster, store if cluster == "bench-a" else size + 4 * GiB)
    try:
        if args.qos_only or args.sweep_only:
            quick_sections(args, size)
            return
        if not args.latency_only:
            full_sections(args, size, incr_size)
        with injected_latency(args.delay) as proxy:
            latency_section(args.delay, lat_size, args.window, args.reps, proxy.pid)
    finally:
        if not args.keep:
            for cluster in CLUSTERS:
                ceph_sh("stop", cluster, 0)


def quick_sections(args: argparse.Namespace, size: int) -> None:
    client = Client()
    try:
        if args.qos_only:
            with client.ioctx("bench-a", "volumes") as vols:
                make_source(vols, "dense", size, sparse=False, seed=1)
            qos_run(client, "dense", size, args.window, args.qos_mib * MiB)
        else:
            window_sweep(client, size, [1, 4, 8, 16, 32], args.reps)
    finally:
        client.close()


def full_sections(args: argparse.Namespace, size: int, incr_size: int) -> None:
    client = Client()
    try:
        with client.ioctx("bench-a", "volumes") as vols:
            changed = make_source(vols, "dense", size, sparse=False, seed=1)
            make_source(vols, "sparse", size, sparse=True, seed=2)
            dense_data = data_bytes(vols, "dense", "s1")
            sparse_data = data_bytes(vols, "sparse", "s1")
        print(f"\nSingle 4 MiB op, no injected latency: {latency_line(client)}")

        dense = Bench(client, size, args.window, changed=changed, data=dense_data)
        sparse = Bench(client, size, args.window, changed=changed, data=sparse_data)
        for rep in range(args.reps):
            print(f"\nrep {rep + 1}/{args.reps}, dense {size / GiB:.1f} GiB:")
            dense.rep("dense", ["rbd_cp", "rbd_deep_cp", "export_import", "export_diff",
                                "cairn", "cairn_cross"])
            print(f"rep {rep + 1}/{args.reps}, 50 %-sparse {size / GiB:.1f} GiB:")
            sparse.rep("sparse", ["rbd_cp", "export_import", "cairn_full"])
        report(f"Dense {size / GiB:.1f} GiB image", dense, [
            ("Cairn full", "rbd cp", 1.1),
            ("Cairn cross-cluster", "rbd cp", 1.0),
            ("Cairn restore", "Cairn full", 1.0),
            ("Cairn incremental", "Cairn full", 0.9),
            ("Cairn incremental + snapshot", "export-diff | import-diff (incr.)", 1.5),
            ("Cairn full", "rbd export | rbd import", 1.0),
            ("Cairn full + snapshot", "export-diff | import-diff (full)", 1.0),
            ("Cairn full", "rbd deep cp", 1.0),
        ])
        report(f"50 %-sparse {size / GiB:.1f} GiB image (MiB/s of logical size)", sparse, [
            ("Cairn full", "rbd cp", 1.0),
            ("Cairn restore", "Cairn full", 1.0),
        ])
        print(f"\nBackup snapshot creation (not in the Cairn rates above): median "
              f"{statistics.median(SNAPSHOT_SECONDS) * 1e3:.0f} ms, max "
              f"{max(SNAPSHOT_SECONDS) * 1e3:.0f} ms over {len(SNAPSHOT_SECONDS)}")
        qos_run(client, "dense", size, args.window, args.qos_mib * MiB)
        with client.ioctx("bench-a", "volumes") as vols:
            remove_image(vols, "sparse")
            remove_image(vols, "dense")
            changed = make_thin_source(vols, "thin", incr_size, seed=4)
        full_rate = median_line(dense.results["Cairn full"])[0]
        scale = Bench(client, incr_size, args.window, changed=changed)
        scale.results["Cairn full (dense section)"] = dense.results["Cairn full"]
        for rep in range(args.reps):
            print(f"\nrep {rep + 1}/{args.reps}, incremental at scale: {incr_size / GiB:.0f} GiB "
                  f"thin image, {changed / GiB:.1f} GiB changed:")
            scale.rep("thin", ["export_diff_incr_only", "cairn_incr_only"])
        report(f"Incremental at scale ({changed / GiB:.1f} GiB changed in a "
               f"{incr_size / GiB:.0f} GiB image; MiB/s of changed bytes)", scale, [
                   ("Cairn incremental + snapshot", "export-diff | import-diff (incr.)", 1.5),
                   ("Cairn incremental", "Cairn full (dense section)", 0.9),
               ])
        print(f"(Cairn full, dense section: {full_rate:.0f} MiB/s)")
        with client.ioctx("bench-a", "volumes") as vols:
            remove_image(vols, "thin")
    finally:
        client.close()


def latency_section(delay: float, size: int, window: int, reps: int, proxy_pid: int) -> None:
    slow = Client()
    try:
        with slow.ioctx("bench-a", "volumes") as vols:
            changed = make_source(vols, "lat", size, sparse=False, seed=3)
        print(f"\nSingle 4 MiB op through the delay proxy ({delay * 1e3:.0f} ms each way): "
              f"{latency_line(slow)}")
        lat = Bench(slow, size, window, changed=changed, data=size)
        cpu0 = process_cpu(proxy_pid)
        for rep in range(reps):
            print(f"\nrep {rep + 1}/{reps}, latency injected, dense {size / GiB:.1f} GiB:")
            lat.rep("lat", ["rbd_cp", "export_import", "export_import_one_op", "export_diff",
                            "cairn", "cairn_cross"])
        proxied = sum(r.copied for runs in lat.results.values() for r in runs)
        report(f"Latency injected ({delay * 1e3:.0f} ms each way), dense {size / GiB:.1f} GiB",
               lat, [
                   ("Cairn full", "rbd export | rbd import", 3.0),
                   ("Cairn full", "rbd export | rbd import (1 op)", 3.0),
                   ("Cairn restore", "Cairn full", 1.0),
                   ("Cairn full + snapshot", "export-diff | import-diff (full)", 3.0),
                   ("Cairn incremental + snapshot", "export-diff | import-diff (incr.)", 1.5),
                   ("Cairn full", "rbd cp", 1.0),
               ])
        print(f"\n(The delay proxy, a process of its own and in no method's CPU figure, "
              f"used {(process_cpu(proxy_pid) - cpu0) / (proxied / GiB):.2f} CPU-s per GiB "
              "copied.)")
        with slow.ioctx("bench-a", "volumes") as vols:
            remove_image(vols, "lat")
    finally:
        slow.close()


if __name__ == "__main__":
    main()
