"""Issue 35's repeated full after 1 % of the objects changed, for `object_target.py`:
measured through Cairn's own backup path, the API's `POST /v1/backups` with kind `full`
to an object target, run by a cairn-worker of this tree.

Why not the engine alone: what makes a repeated full fast (a synthetic full: the RBD diff
since the previous restore point's source snapshot, the unchanged chunks' names taken
from its manifest) is decided in the backup manager (`worker/managers/object_backup.py`),
which knows the volume's previous restore point and whether its source snapshot is still
there. At the engine level the same work is `object_copy.upload(base=..., since=...)`,
which is what an incremental does and did before issue 35 too, so timing it would show
10x whether or not a full takes that path. Through the API the figure moves only when
Cairn's full does.

This tree's cairn-api, cairn-worker and cairn-scheduler run as bench/rbd_path.py runs
them (`python -c` on this tree, SQLite at .state/bench/object-target/run/, Redis database
CAIRN_BENCH_REDIS_DB + 2, production's job timings), with one object target `s3`: the
local bucket under a prefix of its own, 4 MiB chunks, 10 uploads in flight (the default).
On a new image of the half-compressible data: a warm-up full of a small image (not
counted), the first full, 64 KiB rewritten in 1 % of the 4 MiB objects, the repeated
full; then the first restore point is deleted and the repeated one restored into a new
image and compared with the volume byte for byte (a synthetic full's manifest must be
complete on its own). A job is timed from its submission until a poll sees it succeeded
(`rbd_path.Cairn.job`); also printed: its `copy` phase, the worker's CPU, what the
restore point says it read and why it was a full copy."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rados
import rbd
from object_common import GiB, MiB, change, make_image, remove_prefix, s3_settings
from rbd_path import Cairn, Tree, describe, running

from tests.support import ceph
from tests.support.stack import OBJECT_KEY_FILE

REPO = Path(__file__).resolve().parent.parent
HOME = ceph.STATE / "bench" / "object-target"
CHANGED = 0.01
WARM_UP_BYTES = 64 * MiB


@dataclass
class ObjectTree(Tree):
    """rbd_path's tree, with the object target `s3` in place of the test stacks' targets."""

    prefix: str = ""

    def env(self) -> dict[str, str]:
        env = super().env()
        target = s3_settings(self.prefix).model_dump(mode="json")
        env["CAIRN_OBJECT_TARGETS"] = json.dumps({"s3": {**target, "chunk_size_mib": 4}})
        env["CAIRN_OBJECT_KEY_FILE"] = str(OBJECT_KEY_FILE)
        return env


@dataclass
class Timed:
    seconds: float
    worker_cpu: float
    job: dict[str, Any]
    restore_point: dict[str, Any]

    @property
    def copy_seconds(self) -> float:
        phases: dict[str, float] = self.job["timings"].get("phases") or {}
        return float(phases.get("copy", float("nan")))


def backup(cairn: Cairn, name: str) -> Timed:
    cpu, started = cairn.worker_cpu(), time.monotonic()
    job = cairn.job("full", "POST", "/v1/backups",
                    {"volume": f"ceph-a/volumes/{name}", "target": "s3", "kind": "full"})
    seconds, cpu = time.monotonic() - started, cairn.worker_cpu() - cpu
    return Timed(seconds, cpu, job, cairn.restore_point(job["restore_point_id"]))


def digest(io: rados.Ioctx, name: str, size: int) -> str:
    hashed = hashlib.blake2b()
    with rbd.Image(io, name, read_only=True) as image:
        for offset in range(0, size, 4 * MiB):
            hashed.update(image.read(offset, min(4 * MiB, size - offset)))
    return hashed.hexdigest()


def report(io: rados.Ioctx, size: int) -> None:
    run = HOME / "run"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    prefix = f"bench-synthetic-{uuid.uuid4().hex[:8]}"
    commit, title = describe(REPO)
    tree = ObjectTree("after", REPO, commit, title,
                      int(os.environ.get("CAIRN_BENCH_REDIS_DB", "3")) + 2,
                      run / "cairn.db", prefix=prefix)
    warm, name = ceph.unique_name("bench-synthetic-warm"), ceph.unique_name("bench-synthetic")
    restored = f"{name}-restored"
    make_image(io, warm, WARM_UP_BYTES, random=False, seed=4, snapshot=None)
    make_image(io, name, size, random=False, seed=5, snapshot=None)
    print(f"\nrepeated full after {CHANGED:.0%} of the objects changed, through the API "
          f"(object target, 4 MiB chunks, 10 in flight; {title}):")
    try:
        with running(tree, run) as cairn:
            backup(cairn, warm)
            first = backup(cairn, name)
            changed = change(io, name, CHANGED, seed=6, snapshot=None)
            repeated = backup(cairn, name)
            cairn.job("delete", "DELETE", f"/v1/restore-points/{first.job['restore_point_id']}")
            started = time.monotonic()
            cairn.job("restore", "POST",
                      f"/v1/restore-points/{repeated.job['restore_point_id']}/restore",
                      {"target": restored})
            restore_seconds = time.monotonic() - started
            same = digest(io, restored, size) == digest(io, name, size)
    finally:
        for image in (restored, name, warm):
            ceph.remove_image(io, image)
        remove_prefix(prefix)
    for label, timed in (("first full", first), (f"repeated full, {changed} objects changed",
                                                  repeated)):
        rp = timed.restore_point
        print(f"  {label:36s} {timed.seconds:7.2f} s (copy phase {timed.copy_seconds:6.2f} s)  "
              f"worker CPU {timed.worker_cpu:6.2f} s  read {(rp.get('bytes_read') or 0) / MiB:7.1f}"
              f" MiB, sent {(rp.get('bytes_copied') or 0) / MiB:7.1f} MiB  kind {rp['kind']}"
              f"{'; ' + rp['full_reason'] if rp.get('full_reason') else ''}")
    print(f"  first / repeated: {first.seconds / repeated.seconds:.1f}x job to job, "
          f"{first.copy_seconds / repeated.copy_seconds:.1f}x copy phase to copy phase "
          f"(goal >= 10x); the repeated full read "
          f"{(repeated.restore_point.get('bytes_read') or 0) / size:.1%} of the "
          f"{size / GiB:g} GiB volume")
    print(f"  restore of the repeated full alone (its base deleted first): "
          f"{restore_seconds:.2f} s, {'the same bytes as' if same else 'DIFFERENT from'} "
          f"the volume")
    if not same:
        raise SystemExit("the repeated full did not restore to the volume's data")
