"""Issue 31's acceptance as a benchmark: 16 first backups to a fresh object target at once,
the workers restarted, every restore point restored and compared with its source, round
after round; prints how many restore points restored byte for byte of how many were made.

    make bench-object-key-race ARGS="--rounds 20"
    .venv/bin/python bench/object_key_race.py [--rounds 20] [--backups 16] [--forced]

Each round: a new prefix on the local RGW (a target never written to), two cairn-worker
processes of 8 jobs each (what one process caches, the other does not share), 16 volumes of
just over 2 MiB (odd sizes, random data; 1 MiB chunks); then both workers are killed and
started again, and every restore point is restored into a new image and its sha256
compared with the source's.

Without `--forced` the workers reach RGW directly: the race happens as often as the
timing makes it. With `--forced` they reach it through `tests/support/s3_proxy.py`, which
holds the first writes of the key until two backups have found none and lets them through
one at a time: the race happens every round.

Runs on the local stack's servers (`make bench-object-key-race` starts them: Ceph with RGW,
Redis, PostgreSQL), with a database of its own on PostgreSQL and Redis database
CAIRN_BENCH_REDIS_DB (3); memstore is fine, every round removes what it made."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import ceph, rgw
from tests.support.databases import migrated_database
from tests.support.object_workers import first_backups_then_restores, object_workers
from tests.support.s3_proxy import S3Proxy
from tests.support.stack import start_stack, stop_stack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--backups", type=int, default=16)
    parser.add_argument("--forced", action="store_true",
                        help="force the race through the S3 proxy every round")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the stack's development warnings, each round
    redis_db = int(os.environ.get("CAIRN_BENCH_REDIS_DB", "3"))
    print(f"object key race: {args.rounds} rounds of {args.backups} first backups to a fresh "
          f"target, 2 workers restarted before the restores; "
          f"{'forced through the S3 proxy' if args.forced else 'straight to RGW'}; "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    made = exact = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch, \
            migrated_database("postgresql", Path(scratch)) as url:
        stack = start_stack(url, redis_db, Path(scratch) / "logs")
        proxy = S3Proxy(json.loads(rgw.CREDENTIALS.read_text())["endpoint"], rgw.CREDENTIALS) \
            if args.forced else None
        try:
            with ceph.ioctx("ceph-a", "volumes") as io:
                for n in range(1, args.rounds + 1):
                    images: list[str] = []
                    t0 = time.monotonic()
                    try:
                        with object_workers(stack, ["fresh"], tag="bench-race",
                                            endpoint=proxy.endpoint if proxy else None,
                                            hand_back=False) as workers:
                            if proxy is not None:
                                proxy.race_key_writes(workers.prefixes["fresh"], writers=2)
                            result = first_backups_then_restores(
                                workers, io, "fresh", images, count=args.backups,
                                seed=1000 * n)
                    finally:
                        for name in images:
                            ceph.remove_image(io, name)
                    made += result.backed_up
                    exact += result.restored_exactly
                    print(f"round {n:2d}: {result.restored_exactly:2d} / {result.backed_up:2d} "
                          f"restored byte for byte ({time.monotonic() - t0:.1f} s)"
                          + "".join(f"\n    {why[:160]}" for why in result.failures[:3])
                          + (f"\n    ... {len(result.failures) - 3} more"
                             if len(result.failures) > 3 else ""), flush=True)
        finally:
            if proxy is not None:
                proxy.close()
            stop_stack(stack)
    print(f"total: {exact} / {made} restore points restored byte for byte "
          f"({args.rounds * args.backups - made} backups failed; "
          f"{time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
