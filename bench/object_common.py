"""What the object-target benchmarks share (`object_target.py` and its sections): the
images they back up, a fresh chunk store per run, and one upload timed with its CPU."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import resource
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import rados
import rbd

from services.settings import S3Settings
from services.storage.s3 import Bucket
from tests.support import ceph, rgw
from worker.engine import object_copy
from worker.engine.chunk_store import ChunkStore, ObjectManifest
from worker.engine.object_copy import TransferStats

MiB = 1 << 20
GiB = 1 << 30
OPERATOR_KEY = hashlib.sha256(b"bench operator key").digest()
PROJECT = "bench"


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def server_cpu() -> float:
    """CPU-seconds so far of the servers on the data path: RGW and the OSD (both on ceph-a,
    sharing the machine's cores with the client)."""
    total = 0.0
    found = subprocess.run(["pgrep", "-x", "radosgw|ceph-osd"], check=False,
                           capture_output=True, text=True)
    for pid in found.stdout.split():
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def half_compressible(rng: ceph._Random, n: int) -> bytes:
    """Half random, half text-like bytes, per 64 KiB: compresses about 2:1 with zstd."""
    words = [f"{w:08x} volume block record {w % 977} ".encode() for w in range(4096)]
    out = bytearray()
    while len(out) < n:
        out += rng.bytes(32 * 1024)
        seed = rng.bytes(2)
        start = int.from_bytes(seed, "little") % 3000
        out += b"".join(words[start:start + 1000])[:32 * 1024]
    return bytes(out[:n])


def make_image(io: rados.Ioctx, name: str, size: int, *, random: bool, seed: int,
               snapshot: str | None = "s1") -> None:
    rbd.RBD().create(io, name, size)
    rng = ceph._Random(seed)
    with rbd.Image(io, name) as image:
        for offset in range(0, size, 64 * MiB):
            n = min(64 * MiB, size - offset)
            image.write(rng.bytes(n) if random else half_compressible(rng, n), offset)
        if snapshot is not None:
            image.create_snap(snapshot)


def change(io: rados.Ioctx, name: str, fraction: float, seed: int,
           snapshot: str | None = "s2") -> int:
    """Rewrites 64 KiB in `fraction` of the image's 4 MiB objects, then snapshots
    `snapshot` (when given); how many objects it changed."""
    rng = ceph._Random(seed)
    with rbd.Image(io, name) as image:
        objects = image.size() // (4 * MiB)
        step = max(1, round(1 / fraction))
        changed = range(0, objects, step)
        for index in changed:
            image.write(rng.bytes(64 * 1024), index * 4 * MiB + 123 * 4096)
        if snapshot is not None:
            image.create_snap(snapshot)
    return len(changed)


def s3_settings(prefix: str, endpoint: str | None = None) -> S3Settings:
    """The local RGW's bucket under `prefix`, reached at `endpoint` (a delay line in front
    of RGW) when given."""
    settings = rgw.settings(prefix)
    if endpoint is None:
        return settings
    return settings.model_copy(update={"endpoint": endpoint})


@contextmanager
def fresh_store(prefix_tag: str, endpoint: str | None = None) -> Iterator[ChunkStore]:
    """A new chunk store under a prefix of its own (reached through `endpoint` when given);
    everything under it is removed afterwards, straight from RGW."""
    prefix = f"bench-{prefix_tag}-{uuid.uuid4().hex[:8]}"
    bucket = Bucket(s3_settings(prefix, endpoint))
    try:
        with tempfile.TemporaryDirectory() as scratch, rgw.key_database(Path(scratch)) as db:
            yield ChunkStore.open(db, bucket, PROJECT, OPERATOR_KEY, create=True)
    finally:
        bucket.close()
        remove_prefix(prefix)


def remove_prefix(prefix: str) -> None:
    bucket = Bucket(s3_settings(prefix))
    try:
        for key in [stored.key for stored in bucket.list(deadline=math.inf)]:
            bucket.delete(key)
    finally:
        bucket.close()


def stored_bytes(store: ChunkStore) -> int:
    return sum(stored.size for stored in store.backend.list("chunks/", deadline=math.inf))


@dataclass
class Run:
    seconds: float
    cpu: float
    stats: TransferStats
    server_cpu: float = 0.0
    """RGW's and the OSD's CPU-seconds during the run."""


def upload(io: rados.Ioctx, name: str, snap: str, store: ChunkStore, *, window: int,
           chunk: int, base: ObjectManifest | None = None, since: str | None = None,
           known: set[str] | frozenset[str] = frozenset()) -> tuple[ObjectManifest, Run]:
    stats = TransferStats()
    s0, c0, t0 = server_cpu(), cpu(), time.monotonic()
    with rbd.Image(io, name, snapshot=snap, read_only=True) as image:
        manifest = object_copy.upload(image, store, PROJECT, base=base, since=since,
                                      known=known, chunk_size=chunk, window=window,
                                      stats=stats)
    return manifest, Run(time.monotonic() - t0, cpu() - c0, stats, server_cpu() - s0)
