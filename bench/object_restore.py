"""Issue 35's restores and in-flight figures for `object_target.py`: on loopback and through
the S3 delay line (`object_delay.py`), at 1 and at 10 requests in flight, on the same image.

For each path and each number in flight, each run makes a fresh store and times

- the first full: the image's snapshot `s1` uploaded at 4 MiB chunks (`object_copy.upload`,
  `window` = the number in flight);
- the restore of that manifest into a new image of 4 MiB objects, as Cairn's restore
  creates one (`object_copy.download` into a `target_is_new` image, from the create to the
  close). The number in flight goes to `window` and to any parameter `download` has that
  the code before issue 35 did not and whose name says fetches or in flight (looked up
  with `inspect.signature`, so the bench measures both the old tree and the new one;
  the run prints which parameters it used);

and, once per run of each path, the naive anchor `S3 download | rbd import`: the raw image
stored as one S3 object (put there once, on loopback, by `rbd export | one S3 upload`,
untimed), one GET streamed in 8 MiB reads into `rbd import - <new image>`.

Rates are of the image's size (1 GiB reads as 1 GiB whatever is sent); CPU is the bench
process's (with `rbd import` for the naive anchor) per GiB of image. Ratios printed:
restore / first full (the same number in flight), restore at 10 / naive, and 10 in flight
/ 1 for backup and for restore."""

from __future__ import annotations

import dataclasses
import inspect
import shlex
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
import rados
import rbd
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from object_common import (
    PROJECT,
    GiB,
    MiB,
    Run,
    children_cpu,
    cpu,
    fresh_store,
    s3_settings,
    server_cpu,
    upload,
)
from object_delay import s3_delay_line

from services.settings import S3Settings
from tests.support import ceph
from worker.engine import object_copy

try:  # issue 35 moved a restore's engine into a module of its own
    from worker.engine.object_download import download as engine_download
except ImportError:  # a tree before it
    engine_download = object_copy.download  # type: ignore[attr-defined]
from worker.engine.chunk_store import ChunkStore, ObjectManifest
from worker.engine.object_copy import TransferStats

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

IN_FLIGHT = (1, 10)
CHUNK = 4 * MiB
RESTORE_ORDER = 22
"""4 MiB objects, as Cairn's restore makes a new image (worker/managers/object_restore.py)."""
BEFORE_ISSUE_35 = frozenset({"store", "project_id", "manifest", "target", "target_is_new",
                             "start", "window", "pacer", "stats", "progress"})
"""`object_copy.download`'s parameters at 86babd0."""
IN_FLIGHT_WORDS = ("flight", "fetch")


def in_flight_kwargs(download: Callable[..., Any], n: int) -> dict[str, int]:
    """The keyword arguments that give `download` `n` fetches in flight: `window` when it
    has it, and every parameter it gained since 86babd0 whose name says fetches or in
    flight (a restore's own number, issue 35)."""
    parameters = inspect.signature(download).parameters
    kwargs = {"window": n} if "window" in parameters else {}
    kwargs |= {name: n for name, parameter in parameters.items()
               if name not in BEFORE_ISSUE_35 and any(word in name for word in IN_FLIGHT_WORDS)
               and not isinstance(parameter.default, bool)}  # not a switch such as prefetch
    return kwargs


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else float("nan")


@dataclass
class Figures:
    """One path's runs: seconds and CPU-seconds per kind of run."""

    label: str
    seconds: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)
    stages: dict[str, list[dict[str, float]]] = field(default_factory=dict)

    def add(self, kind: str, run: Run) -> None:
        self.seconds.setdefault(kind, []).append(run.seconds)
        self.cpu.setdefault(kind, []).append(run.cpu)
        self.stages.setdefault(kind, []).append(cpu_stages(run.stats))

    def rate(self, kind: str, size: int) -> float:
        """MiB/s of the median run of `kind`; NaN when there was none."""
        if not self.seconds.get(kind):
            return float("nan")
        return size / statistics.median(self.seconds[kind]) / MiB


def cpu_stages(stats: TransferStats) -> dict[str, float]:
    """The per-stage thread-CPU figures the tree's TransferStats carries (any numeric field
    whose name says cpu), in seconds; none before issue 35."""
    values = {f.name: getattr(stats, f.name) for f in dataclasses.fields(stats)}
    return {name: float(value) for name, value in values.items()
            if "cpu" in name and isinstance(value, int | float)}


def median_stages(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each stage's median over the runs that have it."""
    names = dict.fromkeys(name for run in runs for name in run)
    return {name: statistics.median(run[name] for run in runs if name in run) for name in names}


def raw_client(settings: S3Settings) -> S3Client:
    """A plain boto3 client of the bench's own for the naive anchor (not Cairn's Bucket,
    whose data-plane client issue 35 replaces)."""
    credentials = settings.credentials()
    client: S3Client = boto3.session.Session().client(
        "s3", endpoint_url=settings.endpoint, region_name=settings.region,
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key.get_secret_value(),
        # As Cairn's Bucket before issue 35: no SHA-256 of each body sent over plain HTTP.
        config=Config(s3={"addressing_style": "path", "payload_signing_enabled": False},
                      read_timeout=300,
                      request_checksum_calculation="when_required",
                      response_checksum_validation="when_required"))
    return client


@contextmanager
def raw_image_object(name: str, snap: str) -> Iterator[tuple[str, str]]:
    """The raw image at `snap` as one S3 object (`rbd export | one S3 upload`, on loopback):
    its bucket prefix and key, removed afterwards."""
    settings = s3_settings(f"bench-naive-{uuid.uuid4().hex[:8]}")
    client = raw_client(settings)
    key = f"{settings.prefix}/raw.img"
    conf = str(ceph.conf_path("ceph-a"))
    export = subprocess.Popen(shlex.split(f"rbd -c {conf} export volumes/{name}@{snap} -"),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert export.stdout is not None
    client.upload_fileobj(export.stdout, settings.bucket, key,
                          Config=TransferConfig(max_concurrency=1, use_threads=False,
                                                multipart_chunksize=8 * MiB))
    if export.wait() != 0:
        raise RuntimeError(f"rbd export of volumes/{name}@{snap} failed")
    try:
        yield settings.prefix, key
    finally:
        client.delete_object(Bucket=settings.bucket, Key=key)
        client.close()


def naive_download_import(io: rados.Ioctx, prefix: str, key: str, endpoint: str | None,
                          size: int) -> Run:
    """`S3 download | rbd import`: one GET of the raw image streamed into `rbd import`."""
    settings = s3_settings(prefix, endpoint)
    client = raw_client(settings)
    target = ceph.unique_name("bench-naive-restore")
    conf = str(ceph.conf_path("ceph-a"))
    s0, c0, cc0, t0 = server_cpu(), cpu(), children_cpu(), time.monotonic()
    try:
        body = client.get_object(Bucket=settings.bucket, Key=key)["Body"]
        rbd_import = subprocess.Popen(
            shlex.split(f"rbd -c {conf} import --no-progress - volumes/{target}"),
            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        assert rbd_import.stdin is not None
        with rbd_import.stdin as pipe:
            while piece := body.read(8 * MiB):
                pipe.write(piece)
        assert rbd_import.stderr is not None
        errors = rbd_import.stderr.read()  # stdin is closed: communicate() would flush it
        if rbd_import.wait() != 0:
            raise RuntimeError(f"rbd import failed: {errors.decode(errors='replace')}")
        run = Run(time.monotonic() - t0, cpu() - c0 + children_cpu() - cc0,
                  TransferStats(bytes_written=size), server_cpu() - s0)
    finally:
        client.close()
        ceph.remove_image(io, target)
    return run


def cairn_restore(io: rados.Ioctx, store: ChunkStore, manifest: ObjectManifest,
                  in_flight: int) -> Run:
    """The manifest into a new image with `in_flight` fetches, timed from its create."""
    target = ceph.unique_name("bench-object-restore")
    stats = TransferStats()
    s0, c0, t0 = server_cpu(), cpu(), time.monotonic()
    try:
        rbd.RBD().create(io, target, manifest.image_size, order=RESTORE_ORDER)
        with rbd.Image(io, target) as image:
            engine_download(store, PROJECT, manifest, image, target_is_new=True,
                                 stats=stats, **in_flight_kwargs(engine_download,
                                                                 in_flight))
        run = Run(time.monotonic() - t0, cpu() - c0, stats, server_cpu() - s0)
    finally:
        ceph.remove_image(io, target)
    return run


def one_path(io: rados.Ioctx, name: str, size: int, runs: int, label: str,
             delay: float | None, window: int = 0) -> Figures:
    """Every run of one path: loopback when `delay` is None, else through the delay line
    (with TCP's `window`)."""
    figures = Figures(label)
    endpoint = s3_settings("unused").endpoint
    line = (nullcontext(endpoint) if delay is None
            else s3_delay_line(endpoint, delay, window))
    with raw_image_object(name, "s1") as (prefix, key), line as via:
        for _ in range(runs):
            for n in IN_FLIGHT:
                with fresh_store(f"restore-w{n}", via) as store:
                    manifest, full = upload(io, name, "s1", store, window=n, chunk=CHUNK)
                    figures.add(f"full {n}", full)
                    figures.add(f"restore {n}", cairn_restore(io, store, manifest, n))
            figures.add("naive", naive_download_import(io, prefix, key, via, size))
    return figures


def print_path(figures: Figures, size: int) -> None:
    print(f"\n{figures.label} (median of {len(figures.seconds['naive'])}):")
    rows = [(f"first full, {n} in flight", f"full {n}") for n in IN_FLIGHT]
    rows += [(f"restore, {n} in flight", f"restore {n}") for n in IN_FLIGHT]
    rows += [("naive S3 download | rbd import", "naive")]
    for title, kind in rows:
        seconds = statistics.median(figures.seconds[kind])
        cpu_per_gib = statistics.median(figures.cpu[kind]) * GiB / size
        stages = median_stages(figures.stages[kind])
        extra = ("  stages " + ", ".join(f"{k} {v * GiB / size:.2f}" for k, v in stages.items())
                 if stages else "")
        print(f"  {title:36s} {seconds:7.2f} s {size / seconds / MiB:8.1f} MiB/s  "
              f"client CPU {cpu_per_gib:5.2f} s/GiB{extra}")
    low, high = IN_FLIGHT

    def rate(kind: str) -> float:
        return figures.rate(kind, size)

    print(f"  restore / first full: {ratio(rate(f'restore {high}'), rate(f'full {high}')):.2f}x "
          f"at {high} in flight, {ratio(rate(f'restore {low}'), rate(f'full {low}')):.2f}x at "
          f"{low} (goal >= 1.0x); restore at {high} / naive: "
          f"{ratio(rate(f'restore {high}'), rate('naive')):.2f}x (goal >= 3x)")
    print(f"  {high} in flight / {low}: backup "
          f"{ratio(rate(f'full {high}'), rate(f'full {low}')):.2f}x, restore "
          f"{ratio(rate(f'restore {high}'), rate(f'restore {low}')):.2f}x "
          f"(goal >= 5x through 25 ms each way)")


def report(io: rados.Ioctx, name: str, size: int, runs: int, delay: float,
           delay_runs: int, window: int) -> None:
    used = in_flight_kwargs(engine_download, IN_FLIGHT[-1])
    print(f"\nrestores and requests in flight, 4 MiB chunks; `download` given "
          f"{', '.join(used) or 'no parameter'} for its fetches in flight")
    print_path(one_path(io, name, size, runs, "loopback", None), size)
    if delay > 0:
        window_text = (f"a window of {window / MiB:g} MiB ({window / MiB / (2 * delay):.0f} "
                       f"MiB/s a connection at most)" if window else "no window")
        print_path(one_path(io, name, size, delay_runs,
                            f"through the S3 delay line, {delay * 1000:g} ms each way, "
                            f"{window_text}", delay, window), size)
