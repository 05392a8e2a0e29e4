"""On-demand backup and restore through the REST API, on real Ceph, Redis, worker and
both databases: the restored bytes equal the source snapshot's, sparse stays sparse."""

from __future__ import annotations

import pytest
import rados

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph


def backup(stack: Stack, image: str, **extra: object) -> dict[str, object]:
    response = stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{image}", **extra})
    assert response.status_code == 202, response.text
    job = stack.wait_job(response.json()["id"])
    assert job["status"] == "succeeded", job
    return job


def test_backup_then_restore_is_byte_exact_and_sparse(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        images: list[str]) -> None:
    source = ceph.unique_name("src")
    restored = ceph.unique_name("restored")
    images += [source, restored]
    ceph.make_mixed_image(volumes_pool, source)

    response = stack.post("/v1/backups", {"volume": f"ceph-a/volumes/{source}",
                                          "target": "local"})
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["status"] == "queued"
    assert job["kind"] == "backup"
    assert job["volume"] == f"ceph-a/volumes/{source}"
    job = stack.wait_job(job["id"])
    assert job["status"] == "succeeded", job
    assert job["progress"]["bytes_done"] == job["progress"]["bytes_total"] > 0
    assert job["timings"]["started_at"]
    assert job["timings"]["finished_at"]

    rp = stack.get(f"/v1/restore-points/{job['restore_point_id']}").json()
    assert rp["status"] == "available"
    assert rp["size_bytes"] == 64 * MiB
    assert rp["checksum"]["algorithm"] == "xxh3-128"
    assert rp["source_snapshot"] == f"cairn.{rp['id']}"
    source_sha = ceph.sha256_of(volumes_pool, source, rp["source_snapshot"])
    # The backup image's snapshot holds exactly the source snapshot's bytes.
    assert ceph.sha256_of(backups_pool, rp["backup_image"], rp["backup_snapshot"]) == source_sha
    assert f"cairn.{rp['id']}" in ceph.snapshots(backups_pool, rp["backup_image"])

    response = stack.post(f"/v1/restore-points/{rp['id']}/restore", {"target": restored})
    assert response.status_code == 202, response.text
    assert response.json()["restore_target"] == f"ceph-a/volumes/{restored}"
    job = stack.wait_job(response.json()["id"])
    assert job["status"] == "succeeded", job

    assert ceph.sha256_of(volumes_pool, restored) == source_sha
    source_alloc = ceph.allocated_bytes(volumes_pool, source, rp["source_snapshot"])
    restored_alloc = ceph.allocated_bytes(volumes_pool, restored)
    assert abs(restored_alloc - source_alloc) <= 0.01 * source_alloc, (restored_alloc,
                                                                       source_alloc)
    assert restored_alloc < 0.5 * rp["size_bytes"]  # holes stayed holes
    # The restore marked the objects it was about to write in the new image's object map
    # up front: the map must name exactly the objects that hold data, as the backup's does.
    assert ceph.mapped_objects(volumes_pool, restored) == ceph.mapped_objects(
        backups_pool, rp["backup_image"], rp["backup_snapshot"])


def test_all_zero_objects_are_not_stored(stack: Stack, volumes_pool: rados.Ioctx,
                                         backups_pool: rados.Ioctx, images: list[str]) -> None:
    """An object the tenant filled with zeros is allocated on the source but costs nothing
    in the backup pool or on restore."""
    import rbd

    source, restored = ceph.unique_name("zeros"), ceph.unique_name("zeros-restored")
    images += [source, restored]
    rbd.RBD().create(volumes_pool, source, 16 * MiB)
    with rbd.Image(volumes_pool, source) as image:
        image.write(b"\x01" * MiB, 0)
        image.write(bytes(8 * MiB), 4 * MiB)  # two whole objects of zeros
    job = backup(stack, source)
    rp = stack.get(f"/v1/restore-points/{job['restore_point_id']}").json()
    assert rp["bytes_copied"] == MiB
    assert ceph.allocated_bytes(backups_pool, rp["backup_image"], rp["backup_snapshot"]) == MiB
    # The first backup marks every object it will write in the object map up front; the
    # zero objects it then skipped must be unmarked again.
    assert ceph.mapped_objects(backups_pool, rp["backup_image"], rp["backup_snapshot"]) == 1
    job = stack.wait_job(stack.post(f"/v1/restore-points/{rp['id']}/restore",
                                    {"target": restored}).json()["id"])
    assert job["status"] == "succeeded", job
    assert ceph.allocated_bytes(volumes_pool, restored) == MiB
    assert ceph.mapped_objects(volumes_pool, restored) == 1
    assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool, source)


def test_second_backup_keeps_one_source_snapshot_and_both_restore_points(
        stack: Stack, volumes_pool: rados.Ioctx, backups_pool: rados.Ioctx,
        images: list[str]) -> None:
    import rbd

    source = ceph.unique_name("twice")
    first_copy, second_copy = ceph.unique_name("first"), ceph.unique_name("second")
    images += [source, first_copy, second_copy]
    ceph.make_mixed_image(volumes_pool, source, size=24 * MiB, seed=2)
    first = backup(stack, source)
    first_sha = ceph.sha256_of(volumes_pool, source)
    with rbd.Image(volumes_pool, source) as image:
        image.write(b"\x07" * MiB, 5 * MiB)
        image.discard(0, 4 * MiB)  # data gone since the first backup
    second = backup(stack, source)
    second_sha = ceph.sha256_of(volumes_pool, source)
    assert first_sha != second_sha

    # Only the newest cairn.* snapshot stays on the source.
    assert ceph.snapshots(volumes_pool, source) == [f"cairn.{second['restore_point_id']}"]
    for job, copy, sha in ((first, first_copy, first_sha), (second, second_copy, second_sha)):
        done = stack.wait_job(stack.post(f"/v1/restore-points/{job['restore_point_id']}/restore",
                                         {"target": copy}).json()["id"])
        assert done["status"] == "succeeded", done
        assert ceph.sha256_of(volumes_pool, copy) == sha

    # Deleting the older one first works (snapshots are independent) ...
    rp1, rp2 = first["restore_point_id"], second["restore_point_id"]
    backup_image = stack.get(f"/v1/restore-points/{rp1}").json()["backup_image"]
    assert stack.wait_job(stack.delete(f"/v1/restore-points/{rp1}").json()["id"])["status"] \
        == "succeeded"
    assert stack.get(f"/v1/restore-points/{rp1}").status_code == 404
    assert ceph.snapshots(backups_pool, backup_image) == [f"cairn.{rp2}"]
    # ... and deleting the last one removes the backup image and the source snapshot.
    assert stack.wait_job(stack.delete(f"/v1/restore-points/{rp2}").json()["id"])["status"] \
        == "succeeded"
    assert backup_image not in ceph.image_names(backups_pool)
    assert ceph.snapshots(volumes_pool, source) == []


# The restore point repository's filters and pages: on each database.
@pytest.mark.both_databases
def test_restore_point_list_pages_and_filters(stack: Stack, volumes_pool: rados.Ioctx,
                                              images: list[str]) -> None:
    import rbd

    first, second = ceph.unique_name("page-a"), ceph.unique_name("page-b")
    images += [first, second]
    for name in (first, second):
        rbd.RBD().create(volumes_pool, name, 4 * MiB)
    ids = [backup(stack, first)["restore_point_id"], backup(stack, second)["restore_point_id"],
           backup(stack, first)["restore_point_id"]]

    listed = stack.get("/v1/restore-points", volume=f"ceph-a/volumes/{first}").json()
    assert [rp["id"] for rp in listed["restore_points"]] == [ids[2], ids[0]]
    page1 = stack.get("/v1/restore-points", limit=2).json()
    assert len(page1["restore_points"]) == 2
    assert page1["next_marker"] == page1["restore_points"][1]["id"]
    page2 = stack.get("/v1/restore-points", limit=2, marker=page1["next_marker"]).json()
    seen = [rp["id"] for rp in page1["restore_points"] + page2["restore_points"]]
    assert len(seen) == len(set(seen))
    assert set(ids) <= set(seen) or page2["next_marker"] is not None
    assert stack.get("/v1/restore-points", volume="ceph-a/volumes/never-backed-up").json() == {
        "restore_points": [], "next_marker": None}
    other = {"X-Project-Id": "project-b"}
    assert stack.get("/v1/restore-points", headers=other).json()["restore_points"] == []
