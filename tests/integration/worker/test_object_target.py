"""Backups to an object-storage target through the real API, worker and a real Ceph RGW:
full and incremental chains restore byte for byte (odd sizes, holes, a grown volume, a
clone), deleting the middle of a chain leaves the rest restorable, verify finds a chunk
overwritten in the bucket and restores refuse it, a wrong operator key reads nothing, and
garbage collection releases exactly what no manifest names."""

from __future__ import annotations

import math
import time
import uuid
from typing import Any

import pytest
import rados
import rbd

from services.errors import TargetKeyUnavailable
from services.limits import target_leases
from services.storage.s3 import Bucket
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import backup, restore, restore_point, start_restore
from tests.support.stack import Stack
from worker.managers import object_gc
from worker.managers.object_stores import open_store
from worker.runtime import Runtime

pytestmark = pytest.mark.ceph

TARGET = "s3"


def chunk_keys(bucket: Bucket, project: str = "project-a") -> dict[str, Any]:
    return {o.key: o for o in bucket.list(f"chunks/{project}/", deadline=math.inf)}


def test_a_chain_on_the_object_target_restores_every_point_exactly(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str], bucket: Bucket) -> None:
    source = ceph.unique_name("s3-chain")
    images.append(source)
    size = 21 * MiB + 12_345  # not a multiple of the chunk or object size
    ceph.make_mixed_image(volumes_pool, source, size=size, seed=31)
    rng = ceph._Random(32)
    points: dict[str, str] = {}
    # The stack's target is shared with the tests run before this one on its xdist worker.
    before = set(chunk_keys(bucket))

    first = restore_point(stack, backup(stack, source, target=TARGET)["restore_point_id"])
    assert (first["target"], first["kind"], first["status"]) == (TARGET, "full", "available")
    points[first["id"]] = ceph.sha256_of(volumes_pool, source)
    stored_after_full = set(chunk_keys(bucket)) - before
    assert stored_after_full, "the full stored no chunk"
    # Holes and zeros are never stored: far fewer chunks than the 1 MiB slices of the image.
    assert len(stored_after_full) < size // MiB

    for step in range(3):
        with rbd.Image(volumes_pool, source) as image:
            image.write(rng.bytes(300_000), 3 * MiB + 777 * step)
            if step == 0:
                image.discard(0, MiB)  # data becomes a hole
            if step == 1:
                image.resize(size + 5 * MiB)  # grows; data in the new part
                image.write(rng.bytes(MiB + 3), size + 2 * MiB)
            if step == 2:
                image.write(bytes(2 * MiB), 9 * MiB)  # zeros over data
        rp = restore_point(stack, backup(stack, source, target=TARGET)["restore_point_id"])
        assert rp["kind"] == "incremental", rp
        assert rp["bytes_read"] <= 4 * 4 * MiB, rp  # the changed objects, not the volume
        points[rp["id"]] = ceph.sha256_of(volumes_pool, source)

    ids = list(points)
    # The middle of the chain goes; every other restore point still restores exactly.
    response = stack.delete(f"/v1/restore-points/{ids[1]}")
    assert response.status_code == 202, response.text
    assert stack.wait_job(response.json()["id"])["status"] == "succeeded"
    del points[ids[1]]
    for rp_id, sha in points.items():
        target = ceph.unique_name("s3-restored")
        images.append(target)
        restore(stack, rp_id, target)
        assert ceph.sha256_of(volumes_pool, target) == sha, f"restore point {rp_id}"
        # Sparse on the target: no more allocated than the source held.
        assert ceph.allocated_bytes(volumes_pool, target) <= 27 * MiB

    verify = stack.post(f"/v1/restore-points/{ids[-1]}/verify", {})
    assert verify.status_code == 202, verify.text
    assert stack.wait_job(verify.json()["id"])["status"] == "succeeded"
    assert restore_point(stack, ids[-1])["verification"]["status"] == "ok"


def test_a_clone_backed_up_to_the_object_target_restores_exactly(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    parent = ceph.unique_name("s3-parent")
    ceph.make_mixed_image(volumes_pool, parent, size=16 * MiB + 512, seed=41)
    with rbd.Image(volumes_pool, parent) as image:
        image.create_snap("base")
        image.protect_snap("base")
    clone = ceph.unique_name("s3-clone")
    rbd.RBD().clone(volumes_pool, parent, "base", volumes_pool, clone)
    try:
        with rbd.Image(volumes_pool, clone) as image:
            image.write(ceph._Random(42).bytes(700_000), 5 * MiB + 1)
        rp = backup(stack, clone, target=TARGET)["restore_point_id"]
        restored = ceph.unique_name("s3-clone-restored")
        images.append(restored)
        restore(stack, rp, restored)
        assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool, clone)
    finally:
        ceph.remove_image(volumes_pool, clone)
        with rbd.Image(volumes_pool, parent) as image:
            image.unprotect_snap("base")
            image.remove_snap("base")
        ceph.remove_image(volumes_pool, parent)


def test_an_overwritten_chunk_is_found_by_verify_and_refused_by_restore(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str], bucket: Bucket) -> None:
    source = ceph.unique_name("s3-corrupt")
    images.append(source)
    rbd.RBD().create(volumes_pool, source, 3 * MiB)
    rng = ceph._Random(51)
    with rbd.Image(volumes_pool, source) as image:
        image.write(rng.bytes(3 * MiB), 0)
    before = set(chunk_keys(bucket))
    rp = backup(stack, source, target=TARGET)["restore_point_id"]
    mine = sorted(set(chunk_keys(bucket)) - before)
    assert len(mine) == 3, mine
    # One chunk's object now holds another chunk's (valid, sealed) bytes.
    other = bucket.get(mine[1], limit=2 * MiB)
    assert other is not None
    bucket.put(mine[0], other)

    target = ceph.unique_name("s3-refused")
    job = stack.wait_job(start_restore(stack, rp, target)["id"])
    assert (job["status"], job["error"]["code"]) == ("failed", "data_corrupt"), job
    assert any(f"the chunk at offset {n * MiB} is corrupt" in job["error"]["message"]
               for n in range(3)), job
    assert target not in ceph.image_names(volumes_pool), "the partial restore was left"

    verify = stack.post(f"/v1/restore-points/{rp}/verify", {})
    job = stack.wait_job(verify.json()["id"])
    assert (job["status"], job["error"]["code"]) == ("failed", "data_corrupt"), job
    assert "1 chunk(s)" in job["error"]["message"], job
    verification = restore_point(stack, rp)["verification"]
    assert verification["status"] == "corrupt", verification
    assert len(verification["corrupt_objects"]) == 1, verification


def test_a_wrong_operator_key_reads_nothing_and_says_so(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str], tmp_path: Any) -> None:
    source = ceph.unique_name("s3-key")
    images.append(source)
    rbd.RBD().create(volumes_pool, source, MiB)
    with rbd.Image(volumes_pool, source) as image:
        image.write(b"k" * MiB, 0)
    backup(stack, source, target=TARGET)
    wrong = tmp_path / "wrong.key"
    wrong.write_text("ab" * 32)
    settings = stack.settings.model_copy(update={"object_key_file": wrong})
    db = _runtime(stack).db
    with pytest.raises(TargetKeyUnavailable, match="not the key the target was made with"):
        open_store(settings, db, TARGET)
    none = stack.settings.model_copy(update={"object_key_file": None})
    with pytest.raises(TargetKeyUnavailable, match="no operator key is configured"):
        open_store(none, db, TARGET)


def _runtime(stack: Stack) -> Runtime:
    from services.clock import clock_for
    from services.db import Database
    from services.storage.ceph import CephClusters
    settings = stack.settings
    return Runtime(settings, Database(settings.database_url), CephClusters(settings),
                   "test-gc", None, clock_for(None))  # type: ignore[arg-type]


def test_garbage_collection_frees_what_no_restore_point_names(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str], bucket: Bucket) -> None:
    source = ceph.unique_name("s3-gc")
    images.append(source)
    rbd.RBD().create(volumes_pool, source, 4 * MiB)
    rng = ceph._Random(61)
    with rbd.Image(volumes_pool, source) as image:
        image.write(rng.bytes(4 * MiB), 0)
    before = set(chunk_keys(bucket))
    old = backup(stack, source, target=TARGET)["restore_point_id"]
    with rbd.Image(volumes_pool, source) as image:
        image.write(rng.bytes(MiB), MiB)  # one chunk changes
    new = backup(stack, source, target=TARGET)["restore_point_id"]
    mine = set(chunk_keys(bucket)) - before
    assert len(mine) == 5, sorted(mine)
    response = stack.delete(f"/v1/restore-points/{old}")
    assert stack.wait_job(response.json()["id"])["status"] == "succeeded"

    rt = _runtime(stack)
    try:
        stats = object_gc.collect(rt, TARGET, grace_seconds=0)
    finally:
        rt.db.dispose()
    assert stats is not None
    assert stats.chunks_deleted >= 1
    left = set(chunk_keys(bucket))
    assert len(mine - left) == 1, "exactly the chunk only the deleted point named is gone"
    restored = ceph.unique_name("s3-gc-restored")
    images.append(restored)
    restore(stack, new, restored)
    assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool, source)


def test_a_killed_upload_resumes_without_sending_again_what_was_stored(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str], bucket: Bucket) -> None:
    source = ceph.unique_name("s3-kill")
    images.append(source)
    rbd.RBD().create(volumes_pool, source, 24 * MiB)
    with rbd.Image(volumes_pool, source) as image:
        image.write(ceph._Random(71).bytes(24 * MiB), 0)
    before = set(chunk_keys(bucket))
    started = stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{source}",
                                         "target": TARGET,
                                         "qos_bytes_per_second": 3 * MiB})
    assert started.status_code == 202, started.text
    job_id = started.json()["id"]
    deadline = time.monotonic() + 60
    while len(set(chunk_keys(bucket)) - before) < 6:
        assert time.monotonic() < deadline, stack.get(f"/v1/jobs/{job_id}").json()
        time.sleep(0.1)
    stack.worker.kill()
    stored = {k: v for k, v in chunk_keys(bucket).items() if k not in before}
    assert len(stored) < 24, "the upload finished before the kill; the test proves nothing"
    stack.worker.start("ready")
    job = stack.wait_job(job_id, timeout=180)
    assert (job["status"], job["attempt"]) == ("succeeded", 2), job
    after = chunk_keys(bucket)
    # What the first attempt stored was found, not sent again: same objects, same times.
    assert all(after[k].modified == v.modified for k, v in stored.items())
    rp = restore_point(stack, job["restore_point_id"])
    assert rp["bytes_copied"] <= (24 - len(stored)) * (MiB + 4096), rp
    restored = ceph.unique_name("s3-kill-restored")
    images.append(restored)
    restore(stack, rp["id"], restored)
    assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(
        volumes_pool, source, f"cairn.{rp['id']}")


def test_an_instant_restore_from_the_object_target_says_use_a_normal_restore(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    source = ceph.unique_name("s3-instant")
    images.append(source)
    rbd.RBD().create(volumes_pool, source, MiB)
    rp = backup(stack, source, target=TARGET)["restore_point_id"]
    answer = stack.post(f"/v1/restore-points/{rp}/restore",
                        {"target": ceph.unique_name("s3-instant-new"), "mode": "instant"})
    assert answer.status_code == 409, answer.text
    assert "use a normal restore" in answer.json()["error"]["message"]


def test_targets_list_the_object_target_with_its_kind(stack: Stack) -> None:
    targets = {t["name"]: t for t in stack.get("/v1/targets").json()["targets"]}
    assert targets[TARGET]["kind"] == "s3"
    assert targets["local"]["kind"] == "rbd"


# The target's leases are rows serialized by a gate row: locking, on each database.
@pytest.mark.both_databases
def test_a_sweep_and_a_backup_never_hold_the_target_at_once(stack: Stack) -> None:
    rt = _runtime(stack)
    target = f"lease-{uuid.uuid4().hex[:8]}"
    try:
        shared = target_leases.try_acquire(rt.db, target, "b1", exclusive=False, ttl_seconds=30)
        also = target_leases.try_acquire(rt.db, target, "b2", exclusive=False, ttl_seconds=30)
        assert shared, "a backup takes a shared lease"
        assert also, "backups share the target"
        assert target_leases.try_acquire(rt.db, target, "gc", exclusive=True,
                                         ttl_seconds=30) is None
        target_leases.release(rt.db, shared)
        target_leases.release(rt.db, also)
        sweep = target_leases.try_acquire(rt.db, target, "gc", exclusive=True, ttl_seconds=1)
        assert sweep
        assert target_leases.try_acquire(rt.db, target, "b3", exclusive=False,
                                         ttl_seconds=30) is None
        time.sleep(1.2)  # the sweep's lease lapses unrenewed: a dead worker's frees itself
        assert not target_leases.renew(rt.db, sweep, 30)
        assert target_leases.try_acquire(rt.db, target, "b3", exclusive=False, ttl_seconds=30)
    finally:
        rt.db.dispose()


def test_copies_from_the_backup_pool_restore_exactly_and_send_only_what_changed(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    source = ceph.unique_name("s3-copy")
    images.append(source)
    ceph.make_mixed_image(volumes_pool, source, size=20 * MiB + 4097, seed=91)
    first_local = backup(stack, source)["restore_point_id"]
    first_sha = ceph.sha256_of(volumes_pool, source)
    with rbd.Image(volumes_pool, source) as image:
        image.write(ceph._Random(92).bytes(200_000), 7 * MiB + 5)
    second_local = backup(stack, source)["restore_point_id"]
    second_sha = ceph.sha256_of(volumes_pool, source)

    copies = []
    for local in (first_local, second_local):
        answer = stack.post(f"/v1/restore-points/{local}/copy", {"target": TARGET})
        assert answer.status_code == 202, answer.text
        job = stack.wait_job(answer.json()["id"])
        assert (job["kind"], job["status"], job["target"]) == ("copy", "succeeded", TARGET), job
        copy = restore_point(stack, job["restore_point_id"])
        assert copy["copied_from_restore_point_id"] == local
        assert copy["created_at"] == restore_point(stack, local)["created_at"]
        copies.append(copy)
    # The second copy read the objects changed between the two backup snapshots only.
    assert copies[1]["kind"] == "incremental", copies[1]
    assert copies[1]["bytes_read"] <= 4 * MiB, copies[1]
    assert copies[1]["bytes_copied"] <= 2 * MiB + 8192, copies[1]

    again = stack.post(f"/v1/restore-points/{first_local}/copy", {"target": TARGET})
    assert again.status_code == 409, again.text
    assert copies[0]["id"] in again.json()["error"]["message"]
    # The local restore points can go: the copies are restore points of their own.
    for local in (first_local, second_local):
        job = stack.wait_job(stack.delete(f"/v1/restore-points/{local}").json()["id"])
        assert job["status"] == "succeeded", job
    for copy, sha in zip(copies, (first_sha, second_sha), strict=True):
        restored = ceph.unique_name("s3-copy-restored")
        images.append(restored)
        restore(stack, copy["id"], restored)
        assert ceph.sha256_of(volumes_pool, restored) == sha, copy


def test_copies_are_refused_where_they_cannot_go(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    source = ceph.unique_name("s3-copy-refused")
    images.append(source)
    rbd.RBD().create(volumes_pool, source, 16 * MiB)
    with rbd.Image(volumes_pool, source) as image:
        image.write(ceph._Random(93).bytes(16 * MiB), 0)
    local = backup(stack, source)["restore_point_id"]
    to_pool = stack.post(f"/v1/restore-points/{local}/copy", {"target": "offsite"})
    assert to_pool.status_code == 422, to_pool.text
    assert "copies go to an object target" in to_pool.json()["error"]["message"]
    unknown = stack.post(f"/v1/restore-points/{local}/copy", {"target": "nowhere"})
    assert unknown.status_code == 422, unknown.text
    remote = backup(stack, source, target=TARGET)["restore_point_id"]
    from_s3 = stack.post(f"/v1/restore-points/{remote}/copy", {"target": TARGET})
    assert from_s3.status_code == 422, from_s3.text
    assert "only restore points of an RBD target" in from_s3.json()["error"]["message"]

    # While a copy reads it, the source cannot be deleted.
    slow = stack.post(f"/v1/restore-points/{local}/copy",
                      {"target": TARGET, "qos_bytes_per_second": MiB}).json()
    deadline = time.monotonic() + 30
    while stack.get(f"/v1/jobs/{slow['id']}").json()["status"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    refused = stack.delete(f"/v1/restore-points/{local}")
    assert refused.status_code == 409, refused.text
    assert "being copied" in refused.json()["error"]["message"]
    assert stack.wait_job(slow["id"])["status"] == "succeeded"


def _plan_copies(stack: Stack, plan_id: str) -> list[dict[str, Any]]:
    points = stack.get("/v1/restore-points", plan_id=plan_id).json()["restore_points"]
    return [p for p in points if p["target"] == TARGET and p["status"] == "available"]


def _wait_for(check: Any, what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.3)
    return found


def test_a_plan_copies_its_restore_points_off_site_with_their_own_retention(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    source = ceph.unique_name("s3-plan")
    images.append(source)
    ceph.make_mixed_image(volumes_pool, source, size=16 * MiB + 1000, seed=101)
    plan = stack.post("/v1/plans", {
        "name": ceph.unique_name("offsite"), "volumes": [f"ceph-a/volumes/{source}"],
        "rules": [{"cron": "0 3 * * *"}], "retention": {"keep_last": 5},
        "offsite": {"target": TARGET, "every": "day", "retention": {"keep_last": 1}}})
    assert plan.status_code == 201, plan.text
    plan_id = plan.json()["id"]
    assert plan.json()["offsite"]["every"] == "day"

    def run(kind: str) -> dict[str, Any]:
        answer = stack.post(f"/v1/plans/{plan_id}/run", {"kind": kind})
        assert answer.status_code == 202, answer.text
        job: dict[str, Any] = stack.wait_job(answer.json()["jobs"][0]["id"])
        assert job["status"] == "succeeded", job
        return job

    first = run("full")
    [copy] = _wait_for(lambda: _plan_copies(stack, plan_id), "the plan's first copy")
    assert copy["copied_from_restore_point_id"] == first["restore_point_id"]
    # The same day again: no second copy.
    with rbd.Image(volumes_pool, source) as image:
        image.write(ceph._Random(102).bytes(100_000), MiB)
    run("incremental")
    time.sleep(2)
    copy_jobs = stack.get("/v1/jobs", plan_id=plan_id, kind="copy").json()["jobs"]
    assert len(copy_jobs) == 1, copy_jobs

    # Every backup now; the copies' own retention keeps only the newest copy, the local
    # retention keeps all three local restore points.
    changed = stack.client.patch(f"/v1/plans/{plan_id}", headers={"X-Project-Id": "project-a",
                                 "X-Roles": "member"},
                                 json={"offsite": {"target": TARGET, "every": "backup",
                                                   "retention": {"keep_last": 1}}})
    assert changed.status_code == 200, changed.text
    with rbd.Image(volumes_pool, source) as image:
        image.write(ceph._Random(103).bytes(100_000), 5 * MiB)
    third = run("incremental")
    newest = _wait_for(lambda: [c for c in _plan_copies(stack, plan_id)
                                if c["copied_from_restore_point_id"]
                                == third["restore_point_id"]], "the third copy")[0]
    _wait_for(lambda: [c["id"] for c in _plan_copies(stack, plan_id)] == [newest["id"]],
              "the copies' retention pruning the older copy")
    local = [p for p in stack.get("/v1/restore-points", plan_id=plan_id).json()["restore_points"]
             if p["target"] == "local" and p["status"] == "available"]
    assert len(local) == 3, local
    restored = ceph.unique_name("s3-plan-restored")
    images.append(restored)
    restore(stack, newest["id"], restored)
    assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(
        volumes_pool, source, f"cairn.{third['restore_point_id']}")


def test_a_plan_refuses_copies_that_cannot_be_made(stack: Stack, volumes_pool: rados.Ioctx,
                                                   images: list[str]) -> None:
    source = ceph.unique_name("s3-plan-refused")
    images.append(source)
    rbd.RBD().create(volumes_pool, source, MiB)
    body = {"name": ceph.unique_name("offsite-bad"), "volumes": [f"ceph-a/volumes/{source}"],
            "rules": [{"cron": "0 3 * * *"}]}
    to_pool = stack.post("/v1/plans", {**body, "offsite": {"target": "offsite"}})
    assert to_pool.status_code == 422, to_pool.text
    assert "copies go to an object target" in to_pool.json()["error"]["message"]
    from_s3 = stack.post("/v1/plans", {**body, "target": TARGET, "offsite": {"target": TARGET}})
    assert from_s3.status_code == 422, from_s3.text
    assert "only restore points of an RBD target" in from_s3.json()["error"]["message"]
