"""Instant restore against a copy restore, through the real API, Keystone, Cinder and Ceph
(issue 16): thin Cinder volumes of 1, 10 and 100 GiB, each holding the same amount of data
(1 GiB by default, spread over the volume), backed up once, then restored into a new Cinder
volume twice: instantly, and by copy. For each it prints:

- usable: from the request to the new volume being `available` in Cinder with its first
  object read back through librbd (what a tenant waits for before attaching it);
- flattened: until the instant restore's job ended (the volume no longer needs the backup);
- copy: until the copy restore's job ended and its first object was read.

Needs the local stack with OpenStack (`make bench-instant` restarts ceph-a on BlueStore so
the data fits; memstore's 4 GiB would not hold the copies). Uses a Cairn of its own
(worker, scheduler, API) on a fresh PostgreSQL database.

    .venv/bin/python bench/instant_restore.py [--sizes-gib 1,10,100] [--data-mib 1024]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import rbd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import ceph
from tests.support.databases import migrated_database
from tests.support.openstack import (
    OpenStackCairn,
    User,
    delete_volume,
    image_of,
    keystone_up,
    make_cloud,
    start_cairn,
)

GIB = 1 << 30
MIB = 1 << 20
CHUNK = 4 * MIB


def write_spread(volume_id: str, size: int, data: int, seed: int) -> None:
    """`data` bytes of random data in 4 MiB pieces spread evenly over the volume."""
    pieces = max(1, data // CHUNK)
    stride = max(CHUNK, (size // pieces) // CHUNK * CHUNK)
    rng = ceph._Random(seed)
    block = rng.bytes(CHUNK)
    with ceph.ioctx("ceph-a", "volumes") as io, rbd.Image(io, image_of(volume_id)) as image:
        for i in range(pieces):
            image.write(block[i % 7:] + block[:i % 7], i * stride)


def first_read(volume_id: str) -> bytes:
    with ceph.ioctx("ceph-a", "volumes") as io, \
            rbd.Image(io, image_of(volume_id), read_only=True) as image:
        return bytes(image.read(0, CHUNK))


def wait_ready(cairn: OpenStackCairn, token: str, job_id: str) -> dict[str, Any]:
    while True:
        job: dict[str, Any] = cairn.call("GET", f"/v1/jobs/{job_id}", token).json()
        if job["timings"]["ready_at"] is not None or job["status"] not in ("queued", "running"):
            return job
        time.sleep(0.05)


def one_size(cairn: OpenStackCairn, member: User, size_gib: int, data: int,
             seed: int) -> dict[str, float]:
    token = member.token()
    api = member.cinder()
    source = api.create(size_gb=size_gib, name=f"bench-instant-{size_gib}g", volume_type=None,
                        description="bench", metadata={})
    made: list[str] = []
    try:
        api.wait_for(source.id, "available", 300)
        write_spread(source.id, size_gib * GIB, data, seed)
        expected = first_read(source.id)
        backup = cairn.call("POST", "/v1/backups", token, json={"volume": source.id}).json()
        done = cairn.wait_job(backup["id"], token, timeout=1800)
        assert done["status"] == "succeeded", done
        rp = done["restore_point_id"]

        asked = time.monotonic()
        job = cairn.call("POST", f"/v1/restore-points/{rp}/restore", token, json={
            "new_volume": {"name": f"instant-{size_gib}g"}, "mode": "instant"}).json()
        ready = wait_ready(cairn, token, job["id"])
        assert ready["status"] in ("running", "succeeded"), ready
        volume_id = ready["restore_volume_id"]
        made.append(volume_id)
        assert api.get(volume_id).status == "available"
        assert first_read(volume_id) == expected
        usable = time.monotonic() - asked
        finished = cairn.wait_job(job["id"], token, timeout=3600)
        assert finished["status"] == "succeeded", finished
        flattened = time.monotonic() - asked

        asked = time.monotonic()
        copy = cairn.call("POST", f"/v1/restore-points/{rp}/restore", token, json={
            "new_volume": {"name": f"copy-{size_gib}g"}}).json()
        made.append(copy["restore_volume_id"])
        copied = cairn.wait_job(copy["id"], token, timeout=3600)
        assert copied["status"] == "succeeded", copied
        assert first_read(copy["restore_volume_id"]) == expected
        copy_seconds = time.monotonic() - asked
        return {"usable": usable, "flattened": flattened, "copy": copy_seconds,
                "flatten_phase": finished["timings"]["phases"].get("flatten", 0.0)}
    finally:
        for volume_id in made:
            delete_volume(member, volume_id)
        delete_volume(member, source.id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-gib", default="1,10,100")
    parser.add_argument("--data-mib", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=1, help="restores per size (medians)")
    args = parser.parse_args()
    if not keystone_up():
        sys.exit("Keystone is not running: `make bench-instant` starts the stack with it")
    sizes = [int(s) for s in args.sizes_gib.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        cloud = make_cloud(directory)
        with migrated_database("postgresql", directory) as url:
            cairn = start_cairn(url, 6, directory / "logs")
            try:
                print(f"# instant vs copy restore into a new Cinder volume; "
                      f"{platform.node()}, {time.strftime('%Y-%m-%d')}, "
                      f"{args.data_mib} MiB of data per volume")
                print(f"{'size':>8} {'usable s':>9} {'flattened s':>12} {'copy s':>8} "
                      f"{'copy/usable':>12}")
                for size in sizes:
                    runs = [one_size(cairn, cloud["a-member"], size, args.data_mib * MIB,
                                     seed=size * 100 + i) for i in range(args.runs)]
                    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                    print(f"{size:>6}G {med['usable']:>9.2f} {med['flattened']:>12.2f} "
                          f"{med['copy']:>8.2f} {med['copy'] / med['usable']:>11.1f}x",
                          flush=True)
            finally:
                cairn.stop()


if __name__ == "__main__":
    main()
