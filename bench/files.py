"""File-level restore (issue 34): files read straight from restore points through Cairn's
public API, against anchors measured in the same run.

Two thin volumes of --size-gib (100) hold a filesystem each, ext4 and XFS, of --files
(50 000) small files in nested directories plus one --big-file-gib (1) file of random data;
made rootless (`mke2fs -d`, `mkfs.xfs -p protofile` into sparse image files; see
bench/files_images.py) and brought in with `rbd import`, which writes only what is not
zero. Each is backed up to the RBD target `local` and the object target `s3`. Then, for
each filesystem and target:

- the first listing of `/`, cold: cairn-files started afresh before each (no session, no
  cache), the median of --runs; and the next one, warm;
- the big file downloaded through the API (streamed, bytes thrown away: by httpx, and by
  curl as a tenant would; once more with its sha256 checked against the source), against
  an anchor:
  - RBD target: `rbd export` of the same bytes from the backup snapshot. `rbd export` has
    no byte range, and the whole 100 GiB export pays for 99 GiB of zeros, so the anchor
    reads the file's own runs (found in the image file by debugfs / xfs_db, checked by
    sha256) from the backup snapshot with librbd as `rbd export` does: object-sized,
    object-aligned reads, 10 in flight (rbd_concurrent_management_ops), nothing written.
    And the literal `rbd export` of the whole snapshot to /dev/null (allocated bytes /
    time), the command the issue names;
  - object target: Cairn's own restore of the same restore point into a new image, rate of
    the volume's allocated bytes over the job's copy (`timings.copy_seconds`; the rate over
    its start to finish is printed too);
- time to first file: a tenant browsing to /dNNN/sNN/fNNNNN.txt (three listings and the
  download; cairn-files started afresh) against a whole-volume restore of the same restore
  point (the request to the job's end, then the file's bytes read from the new image with
  librbd; no attach, no mount: kinder to the restore than a helper VM is).

And versions of one file (/etc/app.conf, changed every fifth backup, absent from the
middle one) across --versions (30) incremental restore points of a small volume, one volume
per target, cold (cairn-files started afresh) and warm; every answer is checked against
what each restore point holds.

Needs ceph-a on BlueStore with RGW, Redis and PostgreSQL (`make bench-files` starts them),
and runs a Cairn of its own: the API (in-process for jobs, a cairn-api process for the
timed HTTP), cairn-worker, cairn-scheduler and cairn-files, on a fresh PostgreSQL database
and Redis database CAIRN_BENCH_REDIS_DB (3). Everything it made is removed at the end.
`--dry-run` makes the tree and both images at the sizes given and checks them (runs found,
every file read back by Dissect, the versions' steps) without Ceph or any server.

    make bench-files ARGS="--size-gib 100 --files 50000"
    .venv/bin/python bench/files.py [--size-gib 100] [--files 50000] [--big-file-gib 1]
        [--filler-gib 0] [--kinds ext4,xfs] [--versions 30] [--runs 3] [--dry-run]

`--filler-gib` adds random data nothing downloads (/filler), so that the whole restore time
to first file is set against holds as much as a tenant's used disk, not only the files.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import rados
import rbd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from files_images import (
    BIG,
    VERSIONED,
    GiB,
    MiB,
    Runs,
    Tree,
    VersionedImage,
    allocated,
    check_runs,
    dissect_check,
    file_runs,
    make_ext4,
    make_tree,
    make_xfs,
)

from tests.support import ceph, flows, rgw
from tests.support.databases import migrated_database
from tests.support.redis_server import free_port
from tests.support.stack import BIN, HEADERS, Process, Stack, api_process, start_stack, stop_stack

KINDS = ("ext4", "xfs")
TARGETS = ("local", "s3")
FILES_READY = "Uvicorn running"
"""What cairn-files logs once it serves (uvicorn's line, as cairn-api's)."""
EXPORT_IN_FLIGHT = 10
"""`rbd export`'s reads in flight: librbd's rbd_concurrent_management_ops (default 10)."""
JOB_TIMEOUT = 3600
VERSIONS_VOLUME = 64 * MiB
GOALS = {"list_local": 2.0, "list_s3": 3.0, "download": 0.8, "versions": 3.0, "first": 10.0}


@dataclass
class Built:
    tree: Tree
    images: dict[str, Path]
    runs: dict[tuple[str, str], Runs]
    """(filesystem, path) -> where that file's bytes lie in the image (and the volume)."""


@dataclass
class Figures:
    """What one filesystem on one target measured."""

    list_cold: list[float] = field(default_factory=list)
    list_warm: float = 0.0
    download: list[float] = field(default_factory=list)
    """MiB/s of each download of the big file (bytes thrown away)."""
    download_hashed: float = 0.0
    """MiB/s of one more, its sha256 computed in the client as the bytes come."""
    download_curl: list[float] = field(default_factory=list)
    """MiB/s of each download by curl (to /dev/null): a tenant's client, in C as
    `rbd export` is, where httpx's own parsing costs the two cores a fifth of the rate."""
    literal: list[float] = field(default_factory=list)
    """RBD: MiB/s of the literal `rbd export` of the whole backup snapshot to /dev/null,
    over the volume's allocated bytes."""
    anchor: list[float] = field(default_factory=list)
    """MiB/s of the anchor (RBD: rbd-export reads of the file's runs; object target: the
    restore job's rate of allocated bytes over its copy)."""
    anchor_note: str = ""
    first_file: list[float] = field(default_factory=list)
    restore_total: float = 0.0
    restore_note: str = ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-gib", type=float, default=100.0,
                        help="size of each volume (thin: only the files are written)")
    parser.add_argument("--files", type=int, default=50_000, help="small files in the tree")
    parser.add_argument("--big-file-gib", type=float, default=None,
                        help="the big file downloaded (default 1, or a quarter of "
                             "--size-gib when that is smaller)")
    parser.add_argument("--filler-gib", type=float, default=0.0,
                        help="random data in /filler that nothing downloads: a fuller volume "
                             "for the whole restore that time to first file is set against")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help="the filesystems measured, of ext4,xfs")
    parser.add_argument("--versions", type=int, default=30,
                        help="restore points the versioned file is looked up in")
    parser.add_argument("--runs", type=int, default=3, help="runs of each timed read")
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the tree and the sparse image files are made")
    parser.add_argument("--dry-run", action="store_true",
                        help="make and check the tree and the images only: no Ceph, no servers")
    args = parser.parse_args()
    size = int(args.size_gib * GiB) // MiB * MiB
    big_gib = args.big_file_gib if args.big_file_gib is not None else min(1.0, args.size_gib / 4)
    big = int(big_gib * GiB) // 4096 * 4096
    if not args.dry_run and not rgw.CREDENTIALS.exists():
        sys.exit("the local RGW is not running: `make bench-files` starts it")
    print(f"# file-level restore: {size / GiB:g} GiB volumes, {args.files} files + "
          f"{big / MiB:g} MiB file; {platform.node()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="cairn-bench-files-", dir=args.scratch))
    try:
        kinds = tuple(k for k in args.kinds.split(",") if k)
        if not kinds or set(kinds) - set(KINDS):
            sys.exit(f"--kinds: some of {','.join(KINDS)}")
        built = build(scratch, size, args.files, big, kinds,
                      int(args.filler_gib * GiB) // MiB * MiB)
        if args.dry_run:
            dry_run(built, scratch, args.versions)
        else:
            measure(built, scratch, args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def build(scratch: Path, size: int, files: int, big: int, kinds: tuple[str, ...] = KINDS,
          filler: int = 0) -> Built:
    t0 = time.monotonic()
    tree = make_tree(scratch / "tree", files, big, filler_bytes=filler)
    if tree.data_bytes * 1.25 + 64 * MiB > size:
        sys.exit(f"{tree.data_bytes / MiB:.0f} MiB of files do not fit a {size / MiB:.0f} MiB "
                 "volume: raise --size-gib or lower --big-file-gib / --files")
    print(f"tree: {len(tree.sha256)} files, {tree.data_bytes / MiB:.1f} MiB "
          f"({time.monotonic() - t0:.1f} s)", flush=True)
    images = {kind: scratch / f"{kind}.img" for kind in kinds}
    runs: dict[tuple[str, str], Runs] = {}
    for kind, image in images.items():
        t0 = time.monotonic()
        if kind == "ext4":
            make_ext4(tree, image, size)
        else:
            make_xfs(tree, image, size, scratch / "xfs.proto")
        made = time.monotonic() - t0
        for path in (BIG, tree.deepest):
            runs[kind, path] = file_runs(kind, image, path, tree.sizes[path])
            check_runs(image, runs[kind, path], tree.sha256[path])
        print(f"{kind}: {image.stat().st_size / GiB:g} GiB image, {allocated(image) / MiB:.1f} "
              f"MiB allocated, made in {made:.1f} s; {BIG} in {len(runs[kind, BIG])} runs, "
              f"{tree.deepest} in {len(runs[kind, tree.deepest])} (both read back by sha256)",
              flush=True)
    # The images hold the files now (and their digests are known): the scratch disk need
    # not hold them twice.
    shutil.rmtree(tree.root, ignore_errors=True)
    tree.root.mkdir()
    return Built(tree, images, runs)


def dry_run(built: Built, scratch: Path, versions: int) -> None:
    for kind, image in built.images.items():
        t0 = time.monotonic()
        count = dissect_check(kind, image, built.tree)
        print(f"{kind}: / lists the tree's {len(built.tree.top)} names; all {count} files read "
              f"back by Dissect, sha256 equal ({time.monotonic() - t0:.1f} s)")
    series = VersionedImage(scratch, VERSIONS_VOLUME, versions)
    pieces = []
    for n in range(versions):
        series.step(n)
        pieces.append(len(series.changes()))
        if series.read_back() != series.expected(n):
            sys.exit(f"versions: step {n} holds other bytes than expected")
    distinct = len({series.expected(n) for n in range(versions)})
    print(f"versions: {versions} steps of {VERSIONED}, {distinct} distinct (absent included), "
          f"each read back as expected; 64 KiB pieces to write per step: {pieces}")
    print("dry run: no Ceph, nothing measured")


# --- the real run -------------------------------------------------------------------------


class FilesService:
    """cairn-files: the stack's own (tests/support/stack.py starts one beside the worker),
    else one of the bench's, on the port the API was told. `restart` gives a cold one: no
    session open, nothing cached."""

    def __init__(self, stack: Stack) -> None:
        theirs = next((p for p in stack.extra if p.name == "cairn-files"), None)
        self.own = not isinstance(theirs, Process)
        self.process = theirs if isinstance(theirs, Process) else Process(
            "cairn-files", [str(BIN / "cairn-files")], stack.env, stack.log_dir / "files.log")
        if self.own:
            self.process.start(FILES_READY)

    def restart(self) -> None:
        self.process.stop()
        self.process.start(FILES_READY)

    def stop(self) -> None:
        if self.own:
            self.process.stop()


def files_env() -> dict[str, str]:
    port = free_port()
    return {"CAIRN_FILES_BIND": f"127.0.0.1:{port}", "CAIRN_FILES_URL": f"http://127.0.0.1:{port}",
            "CAIRN_FILES_TOKEN": secrets.token_urlsafe(32)}


def measure(built: Built, scratch: Path, args: argparse.Namespace) -> None:
    need = (len(built.images) * 3 + 1) * max(allocated(i) for i in built.images.values()) + GiB
    handle = ceph.connect("ceph-a")
    try:
        stats = handle.get_cluster_stats()
    finally:
        handle.shutdown()
    free = stats["kb_avail"] * 1024
    # The micro cluster runs no mgr, and without one the mon reports no space at all (0 of
    # 0 bytes): then the store's size (CEPH_STORE_BYTES, `make bench-files`) is the bound.
    if stats["kb"] == 0:
        print(f"(ceph-a reports no space without a mgr; the run needs about {need / GiB:.1f} "
              "GiB of its store)", flush=True)
    elif free < need:
        sys.exit(f"ceph-a has {free / GiB:.1f} GiB free, the run needs about {need / GiB:.1f} "
                 "(each volume, its two backups and one restore at a time)")
    redis_db = int(os.environ.get("CAIRN_BENCH_REDIS_DB", "3"))
    made: list[str] = []
    with tempfile.TemporaryDirectory() as db_dir, \
            migrated_database("postgresql", Path(db_dir)) as url:
        stack = start_stack(url, redis_db, scratch / "logs", **files_env())
        files: FilesService | None = None
        try:
            files = FilesService(stack)
            with api_process(stack.env, stack.log_dir / "api.log") as address, \
                    httpx.Client(base_url=f"http://{address}", headers=HEADERS,
                                 timeout=600) as http, \
                    ceph.ioctx("ceph-a", "volumes") as volumes, \
                    ceph.ioctx("ceph-a", "backups") as backups:
                bench = Bench(stack, files, http, volumes, backups, built, args, made)
                figures = {}
                for kind in built.images:
                    figures.update(bench.filesystem(kind))
                versions = {target: bench.versions(target) for target in TARGETS}
                report(figures, versions, args)
        finally:
            with ceph.ioctx("ceph-a", "volumes") as volumes:
                for name in made:
                    ceph.remove_image(volumes, name)
            if files is not None:
                files.stop()
            stop_stack(stack)


@dataclass
class Bench:
    stack: Stack
    files: FilesService
    http: httpx.Client
    volumes: rados.Ioctx
    backups: rados.Ioctx
    built: Built
    args: argparse.Namespace
    made: list[str]

    @property
    def tree(self) -> Tree:
        return self.built.tree

    def filesystem(self, kind: str) -> dict[tuple[str, str], Figures]:
        name = self.new_image(f"bench-files-{kind}")
        image = self.built.images[kind]
        t0 = time.monotonic()
        subprocess.run(["rbd", "-c", str(ceph.conf_path("ceph-a")), "import", "--no-progress",
                        "--dest-pool", "volumes", str(image), name], check=True)
        imported = time.monotonic() - t0
        held = ceph.allocated_bytes(self.volumes, name)
        print(f"\n{kind}: rbd import {imported:.1f} s; the volume holds {held / MiB:.1f} MiB, "
              f"the image file {allocated(image) / MiB:.1f} MiB"
              + ("" if held <= allocated(image) + 64 * MiB else
                 "  ** rbd import did not keep it sparse **"), flush=True)
        image.unlink()  # in Ceph now: the scratch disk holds one image at a time
        figures = {}
        for target in TARGETS:
            t0 = time.monotonic()
            rp = self.backup(name, target)
            print(f"  backup to {target}: {time.monotonic() - t0:.1f} s", flush=True)
            figures[kind, target] = self.on_target(kind, target, rp, held)
        return figures

    def on_target(self, kind: str, target: str, rp: dict[str, Any], held: int) -> Figures:
        rp_id, out, runs = rp["id"], Figures(), self.args.runs
        for _ in range(runs):
            self.files.restart()
            out.list_cold.append(self.listing(rp_id, "/", expect=self.tree.top))
        out.list_warm = self.listing(rp_id, "/", expect=self.tree.top)
        for _ in range(runs):
            if target == "local":
                out.anchor.append(self.export_read(rp, self.built.runs[kind, BIG]))
                out.literal.append(self.literal_export(rp, held))
            out.download.append(self.rate(self.download(rp_id, BIG)))
            out.download_curl.append(self.rate(self.download_curl(rp_id, BIG)))
        out.download_hashed = self.rate(self.download(rp_id, BIG, check=True))
        if target == "local":
            out.anchor_note = (f"literal `rbd export` of the whole snapshot to /dev/null: "
                               f"{median(out.literal):.0f} MiB/s of allocated bytes")
        for _ in range(runs):
            self.files.restart()
            out.first_file.append(self.first_file(rp_id))
        job, out.restore_total = self.whole_restore(kind, rp_id)
        copy, whole = job["timings"]["copy_seconds"], job["timings"]["duration_seconds"]
        out.restore_note = (f"restore job {whole:.1f} s ({copy:.1f} s copying, "
                            f"{held / MiB / copy:.0f} MiB/s of allocated bytes over the copy, "
                            f"{held / MiB / whole:.0f} over the job)")
        if target == "s3":
            out.anchor = [held / MiB / copy]
            out.anchor_note = f"over the job's start to finish: {held / MiB / whole:.0f} MiB/s"
        print(f"{kind} on {target}: list / cold {median(out.list_cold):.2f} s, warm "
              f"{out.list_warm:.2f} s; {BIG} {median(out.download):.0f} MiB/s "
              f"(hashed {out.download_hashed:.0f}), anchor "
              f"{median(out.anchor):.0f} MiB/s; first file {median(out.first_file):.2f} s, "
              f"whole restore + read {out.restore_total:.1f} s; {out.restore_note}", flush=True)
        return out

    def rate(self, seconds: float) -> float:
        return self.tree.big_size / MiB / seconds

    # --- through the API ---

    def new_image(self, prefix: str) -> str:
        name = ceph.unique_name(prefix)
        self.made.append(name)
        return name

    def backup(self, image: str, target: str) -> dict[str, Any]:
        job = self.stack.wait_job(flows.start_backup(self.stack, image, target=target)["id"],
                                  timeout=JOB_TIMEOUT)
        if job["status"] != "succeeded":
            raise RuntimeError(f"backup of {image} to {target}: {job['error']}")
        return flows.restore_point(self.stack, job["restore_point_id"])

    def get(self, route: str, /, **params: Any) -> Any:
        response = self.http.get(route, params=params)
        if response.status_code != 200:
            raise RuntimeError(f"GET {route} {params}: {response.status_code} {response.text}")
        return response.json()

    def listing(self, rp_id: str, path: str, expect: list[str] | None = None) -> float:
        t0 = time.monotonic()
        page = self.get(f"/v1/restore-points/{rp_id}/files", path=path, limit=1000)
        seconds = time.monotonic() - t0
        names = {entry["name"] for entry in page["entries"]}
        if expect is not None and not set(expect) <= names:
            raise RuntimeError(f"{path} lists {sorted(names)[:20]}, not {expect[:20]}")
        return seconds

    def download(self, rp_id: str, path: str, *, check: bool = False) -> float:
        """Seconds from the request to the last byte; `check`: sha256 compared too."""
        digest, got = hashlib.sha256(), 0
        t0 = time.monotonic()
        with self.http.stream("GET", f"/v1/restore-points/{rp_id}/files/content",
                              params={"path": path}) as response:
            if response.status_code != 200:
                raise RuntimeError(f"download {path}: {response.status_code} "
                                   f"{response.read()[:500]!r}")
            for piece in response.iter_bytes(MiB):
                got += len(piece)
                if check:
                    digest.update(piece)
        seconds = time.monotonic() - t0
        if got != self.tree.sizes[path] or (check and digest.hexdigest() != self.tree.sha256[path]):
            raise RuntimeError(f"download {path}: {got} bytes, not the source's")
        return seconds

    def download_curl(self, rp_id: str, path: str) -> float:
        """Seconds curl takes from the request to the last byte, thrown away."""
        url = f"{str(self.http.base_url).rstrip('/')}/v1/restore-points/{rp_id}/files/content"
        t0 = time.monotonic()
        done = subprocess.run(
            ["curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download}",
             "--get", "--data-urlencode", f"path={path}",
             *(arg for name, value in HEADERS.items() for arg in ("-H", f"{name}: {value}")),
             url], capture_output=True, text=True, check=False)
        seconds = time.monotonic() - t0
        if done.returncode != 0 or int(done.stdout or 0) != self.tree.sizes[path]:
            raise RuntimeError(f"curl {path}: {done.returncode} {done.stderr[:300]} "
                               f"({done.stdout} bytes)")
        return seconds

    def first_file(self, rp_id: str) -> float:
        """A tenant browsing down to the deepest small file, then downloading it."""
        t0 = time.monotonic()
        top, sub, _ = self.tree.deepest.strip("/").split("/")
        for path in ("/", f"/{top}", f"/{top}/{sub}"):
            self.listing(rp_id, path)
        self.download(rp_id, self.tree.deepest, check=True)
        return time.monotonic() - t0

    def whole_restore(self, kind: str, rp_id: str) -> tuple[dict[str, Any], float]:
        """A restore into a new image, then the deepest file read from it with librbd;
        the finished job and the seconds from the request to the file's last byte."""
        name = self.new_image(f"bench-files-restored-{kind}")
        t0 = time.monotonic()
        job = self.stack.wait_job(flows.start_restore(self.stack, rp_id, name)["id"],
                                  timeout=JOB_TIMEOUT)
        if job["status"] != "succeeded":
            raise RuntimeError(f"restore of {rp_id}: {job['error']}")
        digest = hashlib.sha256()
        with rbd.Image(self.volumes, name, read_only=True) as image:
            for offset, length in self.built.runs[kind, self.tree.deepest]:
                digest.update(image.read(offset, length))
        seconds = time.monotonic() - t0
        if digest.hexdigest() != self.tree.sha256[self.tree.deepest]:
            raise RuntimeError(f"restored image of {rp_id}: {self.tree.deepest} differs")
        ceph.remove_image(self.volumes, name)
        self.made.remove(name)
        return job, seconds

    # --- the RBD anchors ---

    def export_read(self, rp: dict[str, Any], runs: Runs) -> float:
        """MiB/s of `rbd export`'s way of reading, over the file's runs only, from the
        backup snapshot: object-aligned reads of at most an object, 10 in flight, in order;
        the bytes thrown away as `rbd export ... > /dev/null` would."""
        with rbd.Image(self.backups, rp["backup_image"], snapshot=rp["backup_snapshot"],
                       read_only=True) as image:
            object_size = 1 << image.stat()["order"]
            pending: deque[Any] = deque()
            got = 0

            def done(_completion: Any, data: bytes) -> None:
                nonlocal got
                got += len(data or b"")  # None: the read failed, caught below

            t0 = time.monotonic()
            for offset, length in pieces(runs, object_size):
                if len(pending) >= EXPORT_IN_FLIGHT:
                    pending.popleft().wait_for_complete_and_cb()
                pending.append(image.aio_read(offset, length, done))
            while pending:
                pending.popleft().wait_for_complete_and_cb()
            seconds = time.monotonic() - t0
        if got != self.tree.big_size:
            raise RuntimeError(f"rbd reads of the runs gave {got} bytes")
        return got / MiB / seconds

    def literal_export(self, rp: dict[str, Any], held: int) -> float:
        """MiB/s of `rbd export` of the whole backup snapshot to /dev/null, over the
        volume's allocated bytes (its holes cost it little)."""
        spec = f"backups/{rp['backup_image']}@{rp['backup_snapshot']}"
        t0 = time.monotonic()
        subprocess.run(["rbd", "-c", str(ceph.conf_path("ceph-a")), "export", "--no-progress",
                        spec, "-"], check=True, stdout=subprocess.DEVNULL)
        return held / MiB / (time.monotonic() - t0)

    # --- versions ---

    def versions(self, target: str) -> tuple[list[float], float]:
        runs, count = self.args.runs, self.args.versions
        series = VersionedImage(Path(tempfile.mkdtemp(dir=self.built.tree.root.parent)),
                                VERSIONS_VOLUME, count)
        name = self.new_image("bench-files-versions")
        rbd.RBD().create(self.volumes, name, VERSIONS_VOLUME)
        rp_ids = []
        t0 = time.monotonic()
        for n in range(count):
            series.step(n)
            with rbd.Image(self.volumes, name) as image:
                for offset, piece in series.changes():
                    image.write(piece, offset)
            rp_ids.append(self.backup(name, target)["id"])
        print(f"\nversions on {target}: {count} backups in {time.monotonic() - t0:.1f} s",
              flush=True)
        volume_id = flows.restore_point(self.stack, rp_ids[0])["volume_id"]
        expected = [(rp_ids[n], series.expected(n)) for n in reversed(range(count))]
        cold = []
        for _ in range(runs):
            self.files.restart()
            cold.append(self.file_versions(volume_id, expected))
        warm = self.file_versions(volume_id, expected)
        print(f"versions on {target}: cold {median(cold):.2f} s (of {runs}: "
              f"{', '.join(f'{s:.2f}' for s in cold)}), warm {warm:.2f} s", flush=True)
        return cold, warm

    def file_versions(self, volume_id: str, expected: list[tuple[str, str | None]]) -> float:
        t0 = time.monotonic()
        answer = self.get(f"/v1/volumes/{volume_id}/file-versions", path=VERSIONED,
                          limit=len(expected))
        seconds = time.monotonic() - t0
        got = [(v["restore_point_id"], v["sha256"] if v["present"] else None)
               for v in answer["versions"]]
        if got != expected:
            raise RuntimeError(f"versions of {VERSIONED}: {got} is not {expected}")
        return seconds


def pieces(runs: Runs, object_size: int) -> Iterator[tuple[int, int]]:
    """The runs cut at object boundaries."""
    for start, length in runs:
        offset, end = start, start + length
        while offset < end:
            step = min(end, (offset // object_size + 1) * object_size) - offset
            yield offset, step
            offset += step


def median(values: list[float]) -> float:
    return statistics.median(values)


def report(figures: dict[tuple[str, str], Figures],
           versions: dict[str, tuple[list[float], float]], args: argparse.Namespace) -> None:
    cols = list(figures)
    print(f"\n## Figures (medians of {args.runs}; goals from issue 34)\n")
    print("| | " + " | ".join(f"{k} on {t}" for k, t in cols) + " | goal |")
    print("|---" * (len(cols) + 2) + "|")

    def row(label: str, cells: list[str], goal: str) -> None:
        print(f"| {label} | " + " | ".join(cells) + f" | {goal} |")

    row("first listing of / cold, s", [f"{median(f.list_cold):.2f}" for f in figures.values()],
        f"< {GOALS['list_local']:g} RBD, < {GOALS['list_s3']:g} object")
    row("listing of / warm, s", [f"{f.list_warm:.2f}" for f in figures.values()], "")
    row("big file download, MiB/s", [f"{median(f.download):.0f}" for f in figures.values()],
        "")
    row("anchor, MiB/s", [f"{median(f.anchor):.0f}" for f in figures.values()],
        "RBD: rbd-export reads; object: restore")
    row("download / anchor", [f"**{median(f.download) / median(f.anchor):.2f}x**"
                              for f in figures.values()], f">= {GOALS['download']:g}x")
    row("big file download by curl, MiB/s",
        [f"{median(f.download_curl):.0f}" for f in figures.values()], "")
    row("download by curl / anchor", [f"**{median(f.download_curl) / median(f.anchor):.2f}x**"
                                      for f in figures.values()], f">= {GOALS['download']:g}x")
    row("literal `rbd export` of the snapshot, MiB/s of allocated bytes",
        [f"{median(f.literal):.0f}" if f.literal else "" for f in figures.values()], "")
    row("download by curl / literal `rbd export`",
        [f"**{median(f.download_curl) / median(f.literal):.2f}x**" if f.literal else ""
         for f in figures.values()], f">= {GOALS['download']:g}x")
    row("download with sha256 in the client, MiB/s",
        [f"{f.download_hashed:.0f}" for f in figures.values()], "")
    row("time to first file, s", [f"{median(f.first_file):.2f}" for f in figures.values()], "")
    row("whole restore + read the file, s", [f"{f.restore_total:.1f}" for f in figures.values()],
        "")
    row("restore / first file", [f"**{f.restore_total / median(f.first_file):.0f}x**"
                                 for f in figures.values()], f">= {GOALS['first']:g}x")
    print()
    for (kind, target), f in figures.items():
        print(f"{kind} on {target}: {f.anchor_note}; {f.restore_note}")
    print(f"\nversions of {VERSIONED} across {args.versions} restore points (goal < "
          f"{GOALS['versions']:g} s): " + "; ".join(
              f"{t}: cold {median(c):.2f} s, warm {w:.2f} s" for t, (c, w) in versions.items()))


if __name__ == "__main__":
    main()
