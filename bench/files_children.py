"""Parser children for file-level restore (issue 34): what starting one costs, spawned
(`python -I`, the Dissect packages imported) or forked by the fork server
(worker/files/zygote.py), and 30 sessions of one call each (versions of a file across 30
restore points), one after another and 4 at once. Prints figures; no server.

    PYTHONPATH=$PWD python bench/files_children.py [--children 20] [--sessions 30]

CPU per child counts the child's own CPU time up to READY (/proc/<pid>/schedstat), the
zygote's for the fork, and this process's for the exchange."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.support.file_reader import FileReader
from worker.files import sandbox
from worker.files.session import ParserLimits, ParserSession
from worker.files.zygote import Forker

FACTORY = "tests.support.dissect_parser:Operations"
LIMITS = ParserLimits()
CONFIG = LIMITS.child(FACTORY)


def cpu_seconds(pid: int) -> float:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def own_cpu() -> float:
    return time.thread_time()


def children(start: Callable[[sandbox.ChildConfig], sandbox.Child], count: int,
             zygote: Callable[[], int | None]) -> None:
    walls, cpus = [], []
    for _ in range(count):
        pid = zygote()
        before_zygote = cpu_seconds(pid) if pid else 0.0
        before, started = own_cpu(), time.monotonic()
        child = start(CONFIG)
        wall = time.monotonic() - started
        cpu = own_cpu() - before + cpu_seconds(child.pid)
        if pid:
            cpu += cpu_seconds(pid) - before_zygote
        child.kill()
        walls.append(wall * 1000)
        cpus.append(cpu * 1000)
    print(f"  start+seal: wall median {statistics.median(walls):.1f} ms "
          f"(min {min(walls):.1f}, max {max(walls):.1f}); CPU median "
          f"{statistics.median(cpus):.1f} ms (min {min(cpus):.1f}, max {max(cpus):.1f})")


def sessions(start: Callable[[sandbox.ChildConfig], sandbox.Child], image: Path,
             count: int, parallel: int) -> None:
    def one(_: int) -> float:
        with FileReader(image) as reader:
            session = ParserSession(reader, LIMITS, factory=FACTORY, start=start)
            try:
                began = time.monotonic()
                assert session.stat(None, "/etc/hostname")["size"] == 5
                return time.monotonic() - began
            finally:
                session.close()
    started = time.monotonic()
    with ThreadPoolExecutor(parallel) as pool:
        each = list(pool.map(one, range(count)))
    total = time.monotonic() - started
    print(f"  {count} sessions, {parallel} at once: {total * 1000:.0f} ms "
          f"(one session's first call: median {statistics.median(each) * 1000:.0f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--children", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=30)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch, "tree")
        (tree / "etc").mkdir(parents=True)
        (tree / "etc" / "hostname").write_text("cairn")
        image = Path(scratch, "ext4.img")
        subprocess.run(["mke2fs", "-q", "-t", "ext4", "-d", str(tree), str(image), "16M"],
                       check=True)
        print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
        forker = Forker()
        try:
            forker.child(CONFIG).kill()  # the zygote started
            for name, start, zygote in (
                    ("spawned", sandbox.spawn, lambda: None),
                    ("forked", forker.child, lambda: forker.zygote_pid(CONFIG))):
                print(name)
                children(start, options.children, zygote)
                for parallel in (1, 4):
                    sessions(start, image, options.sessions, parallel)
        finally:
            forker.close()


if __name__ == "__main__":
    main()
