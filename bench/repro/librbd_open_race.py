"""A standalone reproduction of the aborts seen in test runs on 2026-11-26/27: one process
opens an RBD image at each of its snapshots (read-only, `diff_iterate`) in three threads,
while another thread of the same process writes it, takes and removes snapshots, removes
it and makes it again. Debian 12's librbd 16.2.15 sometimes aborts the whole process,
with "terminate called after throwing an instance of 'std::system_error' what(): Invalid
argument", or glibc's "__pthread_tpp_change_priority: Assertion ... failed" (a mutex used
after it was destroyed). It aborted after 25 s in one run, and lasted 60-100 s without
aborting in others.

Cairn's worker does the same in one process: a delete opens a volume's backup image while
a backup of that volume takes a snapshot of it, or a prune removes another of its
snapshots. Against the local stack:

    .venv/bin/python bench/repro/librbd_open_race.py [SECONDS] [CONF]

It prints what it did if the process survives; an abort ends it with the message above."""

from __future__ import annotations

import contextlib
import os
import random
import sys
import threading
import time

import rados
import rbd

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 120
CONF = sys.argv[2] if len(sys.argv) > 2 else ".state/ceph-a/ceph.conf"
POOL = "backups"
NAME = f"librbd-open-race-{os.getpid()}"
FEATURES = (rbd.RBD_FEATURE_LAYERING | rbd.RBD_FEATURE_EXCLUSIVE_LOCK
            | rbd.RBD_FEATURE_OBJECT_MAP | rbd.RBD_FEATURE_FAST_DIFF)

cluster = rados.Rados(conffile=CONF, conf={"rados_osd_op_timeout": "60"})
cluster.connect()
until = time.monotonic() + SECONDS
counts = {"opened": 0, "gone": 0, "snapshots": 0, "removed": 0}


def change() -> None:
    io = cluster.open_ioctx(POOL)
    round_ = 0
    while time.monotonic() < until:
        with contextlib.suppress(rbd.ImageExists):
            rbd.RBD().create(io, NAME, 8 << 20, old_format=False, features=FEATURES)
        try:
            with rbd.Image(io, NAME) as image:
                for i in range(3):
                    image.write(os.urandom(4096), random.randrange(0, 8 << 20, 4096))
                    image.create_snap(f"s{round_}-{i}")
                    counts["snapshots"] += 1
                for snap in list(image.list_snaps()):
                    image.remove_snap(snap["name"])
            rbd.RBD().remove(io, NAME)
            counts["removed"] += 1
        except (rbd.ImageNotFound, rbd.ImageBusy, rbd.ImageHasSnapshots):
            pass
        round_ += 1
    io.close()


def read() -> None:
    io = cluster.open_ioctx(POOL)
    while time.monotonic() < until:
        try:
            with rbd.Image(io, NAME, read_only=True) as head:
                snaps = [s["name"] for s in head.list_snaps()]
            for snap in [*snaps, None]:
                with rbd.Image(io, NAME, snapshot=snap, read_only=True) as image:
                    image.diff_iterate(0, image.size(), None, lambda *_: 0, whole_object=True)
                    counts["opened"] += 1
        except (rbd.ImageNotFound, rbd.ObjectNotFound):
            counts["gone"] += 1
    io.close()


threads = [threading.Thread(target=change)] + [threading.Thread(target=read) for _ in range(3)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
with contextlib.suppress(rbd.ImageNotFound):
    rbd.RBD().remove(cluster.open_ioctx(POOL), NAME)
print(f"survived {SECONDS:.0f} s: {counts}")
