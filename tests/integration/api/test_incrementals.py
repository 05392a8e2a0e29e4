"""Incremental backups on real Ceph: a chain of five with random writes, discards, zero
writes and a grown volume between them; each restore point restores byte for byte, each
reads only what changed, and the source keeps one cairn.* snapshot."""

from __future__ import annotations

import pytest
import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import backup, restore, restore_point
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph

OBJECT = 4 * MiB


def _mutate(image: rbd.Image, step: int, rng: ceph._Random) -> set[int]:
    """Change the image the way a VM does; returns the objects touched."""
    size = image.size()
    touched: set[int] = set()

    def mark(offset: int, length: int) -> None:
        touched.update(range(offset // OBJECT, (offset + length - 1) // OBJECT + 1))

    for n in range(3):  # random writes, unaligned
        offset = (rng.bytes(4)[0] * 977 * 1024 + n * 5 * MiB + 333) % (size - 300_000)
        image.write(rng.bytes(250_000), offset)
        mark(offset, 250_000)
    if step % 2 == 0:  # a discard of a whole object and a bit of the next
        image.discard(2 * OBJECT, OBJECT + 64 * 1024)
        mark(2 * OBJECT, OBJECT + 64 * 1024)
    else:  # zeros written over data
        image.write(bytes(MiB), 8 * MiB + 4096)
        mark(8 * MiB + 4096, MiB)
    if step == 2:  # the volume grows; data lands in the new part
        image.resize(size + 10 * MiB)
        image.write(rng.bytes(MiB), size + 6 * MiB)
        mark(size + 6 * MiB, MiB)
    return touched


def test_chain_of_incrementals_restores_each_point_exactly(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    source = ceph.unique_name("chain")
    images.append(source)
    ceph.make_mixed_image(volumes_pool, source, size=48 * MiB, seed=5)
    rng = ceph._Random(99)

    first = restore_point(stack, backup(stack, source)["restore_point_id"])
    assert first["kind"] == "full"
    assert "first backup" in first["full_reason"]
    expected = {first["id"]: ceph.sha256_of(volumes_pool, source)}
    previous = first["id"]
    for step in range(5):
        with rbd.Image(volumes_pool, source) as image:
            touched = _mutate(image, step, rng)
        expected_sha = ceph.sha256_of(volumes_pool, source)
        job = backup(stack, source)
        rp = restore_point(stack, job["restore_point_id"])
        assert rp["kind"] == "incremental", rp
        assert rp["base_restore_point_id"] == previous
        assert rp["full_reason"] is None
        # Only the changed objects are read: never more than the touched ones.
        assert 0 < rp["bytes_read"] <= len(touched) * OBJECT, (rp, sorted(touched))
        assert ceph.snapshots(volumes_pool, source) == [f"cairn.{rp['id']}"]
        expected[rp["id"]] = expected_sha
        previous = rp["id"]

    for rp_id, sha in expected.items():
        target = ceph.unique_name("chain-restored")
        images.append(target)
        restore(stack, rp_id, target)
        assert ceph.sha256_of(volumes_pool, target) == sha, f"restore point {rp_id}"
    grown = restore_point(stack, previous)
    assert grown["size_bytes"] == 58 * MiB


def test_a_missing_base_snapshot_falls_back_to_a_full_and_says_why(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    source = ceph.unique_name("nobase")
    images.append(source)
    ceph.make_mixed_image(volumes_pool, source, size=16 * MiB, seed=6)
    first = backup(stack, source)["restore_point_id"]
    with rbd.Image(volumes_pool, source) as image:
        image.remove_snap(f"cairn.{first}")  # an operator's cleanup script did this
        image.write(b"changed", 0)

    rp = restore_point(stack, backup(stack, source)["restore_point_id"])
    assert rp["kind"] == "full"
    assert f"cairn.{first}" in rp["full_reason"]
    assert "gone" in rp["full_reason"]
    target = ceph.unique_name("nobase-restored")
    images.append(target)
    restore(stack, rp["id"], target)
    assert ceph.sha256_of(volumes_pool, target) == ceph.sha256_of(
        volumes_pool, source, f"cairn.{rp['id']}")


def test_an_explicit_full_copies_everything(stack: Stack, volumes_pool: rados.Ioctx,
                                            images: list[str]) -> None:
    source = ceph.unique_name("full")
    images.append(source)
    ceph.make_mixed_image(volumes_pool, source, size=16 * MiB, seed=7)
    backup(stack, source)
    job = backup(stack, source, kind="full")
    rp = restore_point(stack, job["restore_point_id"])
    assert rp["kind"] == "full"
    assert rp["full_reason"] is None
    assert rp["bytes_read"] == job["progress"]["bytes_total"] > 8 * MiB


def test_an_image_without_object_map_takes_the_slow_path_with_the_same_result(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """No fast-diff: librbd lists each object's snapshots instead of reading the object
    map; the plan, and so the backup, must be the same."""
    source = ceph.unique_name("nomap")
    images.append(source)
    rbd.RBD().create(volumes_pool, source, 20 * MiB, features=rbd.RBD_FEATURE_LAYERING)
    rng = ceph._Random(12)
    with rbd.Image(volumes_pool, source) as image:
        assert not image.features() & rbd.RBD_FEATURE_FAST_DIFF
        image.write(rng.bytes(5 * MiB), 3 * MiB)
        image.write(rng.bytes(MiB), 17 * MiB)
    first = restore_point(stack, backup(stack, source)["restore_point_id"])
    assert first["bytes_read"] == 3 * OBJECT  # objects 0, 1 and 4: holes are not read
    first_sha = ceph.sha256_of(volumes_pool, source)
    with rbd.Image(volumes_pool, source) as image:
        image.write(rng.bytes(4096), 9 * MiB)   # object 2, new
        image.discard(4 * MiB, 4 * MiB)          # object 1, gone
    second = restore_point(stack, backup(stack, source)["restore_point_id"])
    assert second["kind"] == "incremental"
    assert second["bytes_read"] == OBJECT  # object 2; object 1 is only cleared
    for rp, sha in ((first, first_sha), (second, ceph.sha256_of(volumes_pool, source))):
        target = ceph.unique_name("nomap-restored")
        images.append(target)
        restore(stack, rp["id"], target)
        assert ceph.sha256_of(volumes_pool, target) == sha
