"""One first full of an RBD snapshot to the object target, at the chunk size and uploads in
flight given, on the code of the tree that PYTHONPATH names (run with `python -P`, so this
file's directory is not on the path): prints one line of JSON with its seconds, its
process's CPU-seconds (every thread: reads, naming, sealing, requests) and the per-stage
CPU figures that tree's TransferStats carries (fields whose name says cpu; none before
issue 35). Started by `object_cpu.py`, once per tree and run; it imports only what the
code before issue 35 has too (`object_copy.upload`, `ChunkStore.open`, `Bucket`)."""

from __future__ import annotations

import dataclasses
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import rados
import rbd

from services.settings import S3Settings
from services.storage.s3 import Bucket
from tests.support.rgw import key_database
from worker.engine import object_copy
from worker.engine.chunk_store import ChunkStore


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    job = json.loads(sys.argv[1])
    settings = S3Settings.model_validate(job["s3"])
    cluster = rados.Rados(conffile=job["conf"])
    cluster.connect(timeout=10)
    bucket = Bucket(settings)
    try:
        io = cluster.open_ioctx(job["pool"])
        with tempfile.TemporaryDirectory() as scratch, key_database(Path(scratch)) as db, \
                rbd.Image(io, job["image"], snapshot=job["snap"], read_only=True) as image:
            store = ChunkStore.open(db, bucket, job["project"], bytes.fromhex(job["key"]),
                                    create=True)
            stats = object_copy.TransferStats()
            c0, t0 = cpu(), time.monotonic()
            object_copy.upload(image, store, job["project"], chunk_size=job["chunk"],
                               window=job["window"], stats=stats)
            seconds, used = time.monotonic() - t0, cpu() - c0
        io.close()
    finally:
        bucket.close()
        cluster.shutdown()
    values = {f.name: getattr(stats, f.name) for f in dataclasses.fields(stats)}
    print(json.dumps({
        "seconds": seconds, "cpu": used, "bytes_read": stats.bytes_read,
        "bytes_sent": stats.bytes_sent, "chunks_uploaded": stats.chunks_uploaded,
        "stages": {name: float(value) for name, value in values.items()
                   if "cpu" in name and isinstance(value, int | float)},
        "engine": object_copy.__file__}))


if __name__ == "__main__":
    main()
