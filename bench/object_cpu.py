"""Issue 35's client CPU per GiB of a first full at 4 MiB chunks, this tree against the code
before issue 35, in one run: for `object_target.py`.

"Before" is a git worktree of `--before` (default 86babd0, the commit before issue 35) at
.state/bench/object-target/before (reused when it is at that commit, else moved to it);
"after" is this checkout, uncommitted changes included. Each run of either side is a
process of its own (`object_cpu_child.py` under `python -P`, with PYTHONPATH and the
working directory at the tree: it imports that tree's engine, S3 client and codec, and
says which file it took the engine from, checked here) making one first full of the same
snapshot into a fresh prefix of the local bucket, at 10 uploads in flight (the targets'
default), on loopback. The sides alternate (before, after; then after, before; ...), so
neither always runs on the warmer cache. Printed: each side's median seconds and CPU-s per
GiB of image (the child's every thread, from just before the upload to just after), the
ratio after / before (goal <= 0.5x), and the per-stage CPU where TransferStats has it."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import rbd_path
from object_common import OPERATOR_KEY, PROJECT, GiB, MiB, remove_prefix, s3_settings

from tests.support import ceph

DEFAULT_BEFORE = "86babd0"
"""main before issue 35 (the lean S3 client, synthetic fulls, the restore pipeline)."""
HERE = Path(__file__).resolve().parent
REPO = HERE.parent
HOME = ceph.STATE / "bench" / "object-target"
CHILD = HERE / "object_cpu_child.py"
WINDOW = 10
CHUNK = 4 * MiB


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def before_worktree(ref: str) -> Path:
    """A worktree of `ref` at HOME/before (as bench/rbd_path.py's, in this bench's home)."""
    return rbd_path.before_worktree(ref, HOME)[0]


def title(tree: Path) -> str:
    described = git("log", "-1", "--format=%h %s", cwd=tree)[:90]
    if git("status", "--porcelain", "--untracked-files=no", cwd=tree):
        described += " (with uncommitted changes)"
    return described


def first_full(tree: Path, image: str) -> dict[str, Any]:
    """One first full by `tree`'s code in a process of its own; its JSON figures."""
    prefix = f"bench-cpu-{uuid.uuid4().hex[:8]}"
    job = {"conf": str(ceph.conf_path("ceph-a")), "pool": "volumes", "image": image,
           "snap": "s1", "s3": s3_settings(prefix).model_dump(mode="json"),
           "project": PROJECT, "key": OPERATOR_KEY.hex(), "chunk": CHUNK, "window": WINDOW}
    try:
        done = subprocess.run([sys.executable, "-P", str(CHILD), json.dumps(job)], cwd=tree,
                              env={**os.environ, "PYTHONPATH": str(tree)}, check=False,
                              capture_output=True, text=True)
    finally:
        remove_prefix(prefix)
    if done.returncode != 0:
        raise RuntimeError(f"the first full of {tree} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(figures["engine"]).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"the run meant for {tree} imported {figures['engine']}")
    return figures


def report(image: str, size: int, runs: int, before_ref: str) -> None:
    before = before_worktree(before_ref)
    trees = {"before": before, "after": REPO}
    print(f"\nclient CPU of a first full, 4 MiB chunks, {WINDOW} in flight, loopback "
          f"(each run a process of its own; median of {runs}, sides alternating):")
    for label, tree in trees.items():
        print(f"  {label}: {title(tree)}")
    results: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for rep in range(runs):
        order = list(trees) if rep % 2 == 0 else list(reversed(trees))
        for label in order:
            results[label].append(first_full(trees[label], image))
    per_gib: dict[str, float] = {}
    for label, runs_of in results.items():
        seconds = statistics.median(r["seconds"] for r in runs_of)
        per_gib[label] = statistics.median(r["cpu"] for r in runs_of) * GiB / size
        stages = {name: statistics.median(r["stages"][name] for r in runs_of)
                  for name in runs_of[0]["stages"]}
        split = ", ".join(f"{name} {value * GiB / size:.2f}" for name, value in stages.items())
        print(f"  {label:6s} {seconds:7.2f} s {size / seconds / MiB:8.1f} MiB/s  client CPU "
              f"{per_gib[label]:5.2f} s/GiB  sent {runs_of[0]['bytes_sent'] / MiB:.1f} MiB"
              + (f"  stages (CPU-s/GiB): {split}" if split else ""))
    print(f"  after / before: {per_gib['after'] / per_gib['before']:.2f}x client CPU per GiB "
          f"(goal <= 0.5x)")
