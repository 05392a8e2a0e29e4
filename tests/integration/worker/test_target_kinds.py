"""The target-kind suite (issue 33): what a user relies on, run on every kind of target the
stacks configure, through the real API and worker: the RBD pool `local`, the object target
`s3` on the local RGW, and the directory target `dir` (a directory of the stack's own,
`tests/support/stack.py`). A chain of a full and incrementals of an odd-sized, sparse
volume restores byte for byte and stays sparse; verify finds a damaged object or chunk and
a restore is then refused; restore points are deleted in any order and the last one takes
the target's data with it; a worker killed mid-backup is resumed; the orphan reconciler
removes a deleted restore point's manifest planted back; and, on the kinds that collect
garbage, a collection racing a backup never takes a chunk the backup names.

What differs between the kinds is only how a test reaches behind Cairn's back (damaging
stored data, planting an orphan): `Rbd` and `Chunks` below. Everything a user does is the
same call on every kind."""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import rados
import rbd

from services import targets
from services.clock import clock_for
from services.db import Database
from services.limits import target_leases
from services.restore_points.orphans import OrphanReconciler
from services.storage.ceph import CephClusters
from services.storage.object_layout import chunk_key, manifest_key
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import backup, restore, restore_point, start_backup, wait_for_progress
from tests.support.stack import Stack
from worker.engine import chunk_gc
from worker.engine.chunk_store import ObjectManifest
from worker.managers import object_gc
from worker.managers.object_stores import open_store
from worker.runtime import Runtime

pytestmark = pytest.mark.ceph

KINDS = ("local", "s3", "dir")
"""One target of each kind every stack configures: rbd, s3, directory."""
COLLECTED = ("s3", "dir")
"""Those that hold chunks no restore point owns until a garbage collection frees them."""


def _runtime(stack: Stack) -> Runtime:
    settings = stack.settings
    return Runtime(settings, Database(settings.database_url), CephClusters(settings),
                   "test-target-kinds", None, clock_for(None))  # type: ignore[arg-type]


def _close(rt: Runtime) -> None:
    rt.clusters.close()
    rt.db.dispose()


class Rbd:
    """Behind an RBD pool target: the backup image's objects and the RADOS manifests."""

    unit = "object"

    def __init__(self, stack: Stack, name: str) -> None:
        pool = targets.snapshotted(stack.settings, name)
        self.cluster, self.pool = pool.cluster, pool.pool

    def damage(self, rp: dict[str, Any]) -> int:
        """Overwrites the first object of the restore point's data (no snapshot context:
        the snapshot reads it, as `rados put` would); its index."""
        with ceph.ioctx(self.cluster, self.pool) as io, \
                rbd.Image(io, rp["backup_image"], read_only=True) as image:
            prefix = image.stat()["block_name_prefix"]
            io.write_full(f"{prefix}.{0:016x}", b"bit rot" * 1000)
        return 0

    def manifest_of(self, rp: dict[str, Any]) -> bytes | None:
        with ceph.ioctx(self.cluster, self.pool) as io:
            try:
                size = io.stat(f"cairn.manifest.{rp['id']}")[0]
            except rados.ObjectNotFound:
                return None
            return bytes(io.read(f"cairn.manifest.{rp['id']}", size))

    def put_manifest_back(self, rp: dict[str, Any], blob: bytes) -> None:
        with ceph.ioctx(self.cluster, self.pool) as io:
            io.write_full(f"cairn.manifest.{rp['id']}", blob)

    def data_of(self, rps: list[dict[str, Any]]) -> set[str]:
        return {rps[0]["backup_image"]}

    def left_of(self, data: set[str]) -> set[str]:
        """What of `data` the target still holds once every restore point is deleted."""
        with ceph.ioctx(self.cluster, self.pool) as io:
            return data & set(ceph.image_names(io))


class Chunks:
    """Behind a chunk-format target (an object store, a directory): its backend."""

    unit = "chunk"

    def __init__(self, stack: Stack, name: str) -> None:
        self.stack, self.name = stack, name
        self.backend = targets.chunked(stack.settings, name).backend()

    def manifest(self, rp: dict[str, Any]) -> ObjectManifest:
        rt = _runtime(self.stack)
        try:
            store = open_store(rt.settings, rt.db, self.name)
            return store.read_manifest(rp["project_id"], rp["id"], rp["size_bytes"])
        finally:
            _close(rt)

    def damage(self, rp: dict[str, Any]) -> int:
        """Flips one byte in the middle of the restore point's second chunk; its index."""
        key = chunk_key(rp["project_id"], self.manifest(rp).chunks[1])
        blob = self.backend.get(key, limit=2 * MiB)
        assert blob is not None
        flipped = bytearray(blob)
        flipped[len(flipped) // 2] ^= 0x01
        self.backend.put(key, bytes(flipped))
        return 1

    def manifest_of(self, rp: dict[str, Any]) -> bytes | None:
        return self.backend.get(manifest_key(rp["project_id"], rp["id"]), limit=MiB)

    def put_manifest_back(self, rp: dict[str, Any], blob: bytes) -> None:
        self.backend.put(manifest_key(rp["project_id"], rp["id"]), blob)

    def data_of(self, rps: list[dict[str, Any]]) -> set[str]:
        return {chunk_key(rp["project_id"], name) for rp in rps
                for name in self.manifest(rp).names()}

    def left_of(self, data: set[str]) -> set[str]:
        # The chunks go with the garbage collection, not with the delete (ADR 0007).
        rt = _runtime(self.stack)
        try:
            object_gc.collect(rt, self.name, grace_seconds=0)
        finally:
            _close(rt)
        return {key for key in data if self.backend.size(key) is not None}


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest, stack: Stack) -> str:
    return _configured(stack, request.param)


@pytest.fixture(params=COLLECTED)
def collected_target(request: pytest.FixtureRequest, stack: Stack) -> str:
    name = _configured(stack, request.param)
    assert targets.get(stack.settings, name).collects_garbage
    return name


def _configured(stack: Stack, name: str) -> str:
    if targets.find(stack.settings, name) is None:
        pytest.fail(f"the stack has no target {name!r}: the object target needs the local "
                    "RGW (make up RGW=1); the directory target is in every stack "
                    "(tests/support/stack.py, directory_target_env)")
    return name


@pytest.fixture
def behind(stack: Stack, target: str) -> Iterator[Rbd | Chunks]:
    keeps_chunks = isinstance(targets.get(stack.settings, target), targets.ChunkTarget)
    hooks = Chunks(stack, target) if keeps_chunks else Rbd(stack, target)
    yield hooks
    if isinstance(hooks, Chunks):
        hooks.backend.close()


def _sparse_volume(io: rados.Ioctx, name: str) -> int:
    """An odd-sized volume: data with zeros written inside it (object 0), a hole of two
    whole objects (1, 2), an unaligned write (object 3), data up to the end of the last,
    partial object (4)."""
    size = 16 * MiB + 12_345
    rng = ceph._Random(3301)
    rbd.RBD().create(io, name, size)
    with rbd.Image(io, name) as image:
        image.write(rng.bytes(3 * MiB // 2), 0)
        image.write(bytes(256 * 1024), 512 * 1024)
        image.write(rng.bytes(700_000), 13 * MiB + 4097)
        image.write(rng.bytes(size - 16 * MiB - 100), 16 * MiB + 100)
    return size


def test_a_chain_restores_every_point_byte_for_byte_and_sparse(
        stack: Stack, target: str, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    source = ceph.unique_name(f"kinds-{target}")
    images.append(source)
    size = _sparse_volume(volumes_pool, source)
    rng = ceph._Random(3302)
    points: list[tuple[dict[str, Any], str, int]] = []  # point, sha, objects holding data

    def back_up(kind: str) -> dict[str, Any]:
        rp = restore_point(stack, backup(stack, source, target=target)["restore_point_id"])
        assert (rp["target"], rp["kind"], rp["status"], rp["size_bytes"]) == (
            target, kind, "available", size), rp
        points.append((rp, ceph.sha256_of(volumes_pool, source),
                       ceph.mapped_objects(volumes_pool, source)))
        return rp

    back_up("full")
    with rbd.Image(volumes_pool, source) as image:
        image.write(rng.bytes(300_000), 5 * MiB + 3)  # data in the hole
        image.discard(0, MiB)  # data becomes a hole
        image.write(bytes(200_000), 13 * MiB + 4097)  # zeros over data
    back_up("incremental")
    with rbd.Image(volumes_pool, source) as image:
        image.write(rng.bytes(MiB + 3), 9 * MiB)  # one object changes
    last = back_up("incremental")
    assert last["bytes_read"] <= 4 * MiB, last  # the changed object, not the volume

    for rp, sha, holding in points:
        restored = ceph.unique_name(f"kinds-{target}-restored")
        images.append(restored)
        restore(stack, rp["id"], restored)
        assert ceph.sha256_of(volumes_pool, restored) == sha, f"restore point {rp['id']}"
        # Sparse: no object holds data that did not in the source.
        assert ceph.mapped_objects(volumes_pool, restored) <= holding, rp["id"]
    full = ceph.unique_name(f"kinds-{target}-full")
    images.append(full)
    restore(stack, points[0][0]["id"], full)
    assert ceph.allocated_bytes(volumes_pool, full) <= size - 8 * MiB  # the hole stayed


def test_verify_finds_damaged_data_and_a_restore_is_then_refused(
        stack: Stack, target: str, behind: Rbd | Chunks, volumes_pool: rados.Ioctx,
        images: list[str]) -> None:
    source = ceph.random_image(volumes_pool, f"kinds-{target}-verify", 3 * MiB, seed=3303)
    images.append(source)
    rp = restore_point(stack, backup(stack, source, target=target)["restore_point_id"])
    job = stack.wait_job(stack.post(f"/v1/restore-points/{rp['id']}/verify", {}).json()["id"])
    assert job["status"] == "succeeded", job
    assert restore_point(stack, rp["id"])["verification"]["status"] == "ok"

    damaged = behind.damage(rp)
    job = stack.wait_job(stack.post(f"/v1/restore-points/{rp['id']}/verify", {}).json()["id"])
    assert (job["status"], job["error"]["code"]) == ("failed", "data_corrupt"), job
    assert f"1 {behind.unit}(s)" in job["error"]["message"], job
    verification = restore_point(stack, rp["id"])["verification"]
    assert verification["status"] == "corrupt", verification
    assert verification["corrupt_objects"] == [damaged], verification
    refused = stack.post(f"/v1/restore-points/{rp['id']}/restore",
                         {"target": ceph.unique_name(f"kinds-{target}-refused")})
    assert refused.status_code == 409, refused.text
    assert "failed verification" in refused.json()["error"]["message"]


def test_restore_points_are_deleted_in_any_order_and_the_last_takes_the_data(
        stack: Stack, target: str, behind: Rbd | Chunks, volumes_pool: rados.Ioctx,
        images: list[str]) -> None:
    source = ceph.random_image(volumes_pool, f"kinds-{target}-delete", 6 * MiB + 7, seed=3304)
    images.append(source)
    rng = ceph._Random(3305)
    chain: list[dict[str, Any]] = []
    for step in range(3):
        if step:
            with rbd.Image(volumes_pool, source) as image:
                image.write(rng.bytes(MiB), step * 2 * MiB + 11)
        chain.append(restore_point(
            stack, backup(stack, source, target=target)["restore_point_id"]))
    newest_sha = ceph.sha256_of(volumes_pool, source)
    data = behind.data_of(chain)

    def delete(rp: dict[str, Any]) -> None:
        job = stack.wait_job(stack.delete(f"/v1/restore-points/{rp['id']}").json()["id"])
        assert job["status"] == "succeeded", job
        assert stack.get(f"/v1/restore-points/{rp['id']}").status_code == 404
        assert behind.manifest_of(rp) is None, f"{rp['id']}'s manifest outlived it"

    delete(chain[1])  # the middle first, then the full it was based on
    delete(chain[0])
    restored = ceph.unique_name(f"kinds-{target}-after-deletes")
    images.append(restored)
    restore(stack, chain[2]["id"], restored)
    assert ceph.sha256_of(volumes_pool, restored) == newest_sha
    delete(chain[2])
    assert behind.left_of(data) == set()


def test_a_backup_whose_worker_is_killed_is_resumed_and_restores_exactly(
        stack: Stack, target: str, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    # More chunks than a chunk target keeps in flight (10): under QoS those all move at
    # once and report together, so 8 MiB showed no progress before it was done.
    source = ceph.random_image(volumes_pool, f"kinds-{target}-kill", 16 * MiB, seed=3306)
    images.append(source)
    job = start_backup(stack, source, target=target, qos_bytes_per_second=MiB)
    wait_for_progress(stack, job["id"], 1)
    stack.worker.kill()
    killed = stack.get(f"/v1/jobs/{job['id']}").json()
    assert killed["progress"]["bytes_done"] < killed["progress"]["bytes_total"], \
        "the backup finished before the kill; the test proves nothing"
    stack.worker.start("ready")
    done = stack.wait_job(job["id"], timeout=120)
    assert (done["status"], done["attempt"]) == ("succeeded", 2), done
    rp = restore_point(stack, done["restore_point_id"])
    restored = ceph.unique_name(f"kinds-{target}-kill-restored")
    images.append(restored)
    restore(stack, rp["id"], restored)
    assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool, source)


def test_the_orphan_reconciler_removes_a_deleted_points_manifest_planted_back(
        stack: Stack, target: str, behind: Rbd | Chunks, volumes_pool: rados.Ioctx,
        images: list[str]) -> None:
    source = ceph.random_image(volumes_pool, f"kinds-{target}-orphan", 2 * MiB + 5, seed=3307)
    images.append(source)
    gone, kept = (restore_point(stack, backup(stack, source, target=target)[
        "restore_point_id"]) for _ in range(2))
    blob = behind.manifest_of(gone)
    assert blob is not None
    job = stack.wait_job(stack.delete(f"/v1/restore-points/{gone['id']}").json()["id"])
    assert job["status"] == "succeeded", job
    behind.put_manifest_back(gone, blob)  # as if the delete's removal had been lost

    db, clusters = Database(stack.settings.database_url), CephClusters(stack.settings)
    try:
        report = OrphanReconciler(db, clusters, stack.settings).run(
            apply=True, grace=timedelta(0))
    finally:
        clusters.close()
        db.dispose()
    assert not report.errors, report.errors
    found = [(f.action, f.what) for f in report.findings if f.restore_point_id == gone["id"]]
    assert found == [("remove", "manifest")], report.findings
    assert behind.manifest_of(gone) is None
    assert not [f for f in report.findings if f.restore_point_id == kept["id"]]
    restored = ceph.unique_name(f"kinds-{target}-orphan-restored")
    images.append(restored)
    restore(stack, kept["id"], restored)
    assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool, source)


# The target's leases are rows serialized by a gate row: locking, on each database.
@pytest.mark.both_databases
def test_a_collection_beside_a_backup_never_deletes_a_chunk_the_backup_names(
        stack: Stack, collected_target: str) -> None:
    """The interleaving that loses data without the target's leases (ADR 0007), forced on
    each kind that collects garbage: a chunk no manifest names (left by a failed backup)
    is found by a backup's lookup; the collection's mark runs before the backup's manifest
    exists; then the manifest names the chunk."""
    target = collected_target
    project = f"gc-race-{uuid.uuid4().hex[:8]}"
    race_rp = str(uuid.uuid4())  # a restore point id as Cairn's: a manifest named so is marked
    rt = _runtime(stack)
    backend = targets.chunked(stack.settings, target).backend()
    store = open_store(stack.settings, rt.db, target, create=True)
    codec = store.codec()
    data = ceph._Random(3308).bytes(MiB)
    name = codec.name(project, data)
    key = chunk_key(project, name)
    store.put_chunk(project, codec.seal_chunk(project, data, name))
    time.sleep(1.1)  # an S3 store's clock has whole seconds: older than the cutoff

    # Without the leases (the engine's collect alone), the chunk goes.
    marked = chunk_gc.mark(store, object_gc.image_sizes(rt, target), deadline=math.inf)
    assert name not in marked.get(project, set())
    chunk_gc.sweep(store, marked, datetime.now(UTC), deadline=math.inf)
    assert backend.size(key) is None, "the race this test is about did not happen"
    store.put_chunk(project, codec.seal_chunk(project, data, name))
    time.sleep(1.1)

    looked_up, gc_started = threading.Event(), threading.Event()
    result: dict[str, Any] = {}

    def backup_side() -> None:
        with target_leases.held(rt.db, target, "race-backup", exclusive=False,
                                ttl_seconds=30, wait_seconds=10):
            assert store.has_chunk(project, name)  # reused, not sent again
            looked_up.set()
            assert gc_started.wait(30)
            time.sleep(2.0)  # the collection has marked and waits for the lease
            store.write_manifest(project, race_rp, ObjectManifest(MiB, MiB, {0: name}))

    def collection() -> None:
        gc_started.set()
        result["stats"] = object_gc.collect(rt, target, grace_seconds=0, wait_seconds=30)

    try:
        writer = threading.Thread(target=backup_side)
        writer.start()
        assert looked_up.wait(10)
        sweeper = threading.Thread(target=collection)
        sweeper.start()
        writer.join(30)
        sweeper.join(60)
        assert not writer.is_alive()
        assert not sweeper.is_alive()
        assert result["stats"] is not None
        assert backend.size(key) is not None, "the collection deleted a chunk a manifest names"
        manifest = store.read_manifest(project, race_rp, MiB)
        assert store.get_chunk(codec, project, manifest.chunks[0], 0, MiB) == data
    finally:
        store.delete_manifest(project, race_rp)
        backend.delete(key)
        backend.close()
        _close(rt)
