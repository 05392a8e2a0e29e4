"""Backups to another Ceph cluster (the `offsite` target on ceph-b) and of cloned volumes
(Cinder's volumes made from images are RBD clones): restores are byte-exact."""

from __future__ import annotations

import pytest
import rados
import rbd

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import backup, restore, restore_point
from tests.support.stack import Stack

pytestmark = pytest.mark.ceph


def test_backup_to_another_cluster_and_back(
        stack: Stack, volumes_pool: rados.Ioctx, offsite_pool: rados.Ioctx,
        offsite_volumes: rados.Ioctx) -> None:
    source = ceph.unique_name("xc")
    back_home = ceph.unique_name("xc-home")
    there = ceph.unique_name("xc-there")
    ceph.make_mixed_image(volumes_pool, source, size=40 * MiB, seed=21)
    try:
        rp = restore_point(stack, backup(stack, source, target="offsite")["restore_point_id"])
        assert rp["target"] == "offsite"
        assert rp["backup_image"] in ceph.image_names(offsite_pool)
        with rbd.Image(volumes_pool, source) as image:
            image.write(b"after the first backup" * 1000, 20 * MiB)
        expected = ceph.sha256_of(volumes_pool, source)
        inc = restore_point(stack, backup(stack, source, target="offsite")["restore_point_id"])
        assert inc["kind"] == "incremental"
        assert inc["bytes_read"] <= 4 * MiB

        restore(stack, inc["id"], f"ceph-a/volumes/{back_home}")
        assert ceph.sha256_of(volumes_pool, back_home) == expected
        restore(stack, rp["id"], f"ceph-b/volumes/{there}")
        assert ceph.sha256_of(offsite_volumes, there) == ceph.sha256_of(
            offsite_pool, rp["backup_image"], rp["backup_snapshot"])
    finally:
        ceph.remove_image(volumes_pool, source)
        ceph.remove_image(volumes_pool, back_home)
        ceph.remove_image(offsite_volumes, there)


def test_each_target_keeps_the_source_snapshot_its_next_incremental_needs(
        stack: Stack, volumes_pool: rados.Ioctx, images: list[str]) -> None:
    """A volume backed up to two targets: a backup to one removes the older source
    snapshots (beside its own last step), never the one the other target builds on."""
    source = ceph.random_image(volumes_pool, "twotargets", 9 * MiB + 11, seed=23)
    images.append(source)
    home = restore_point(stack, backup(stack, source)["restore_point_id"])
    away = restore_point(stack, backup(stack, source, target="offsite")["restore_point_id"])
    for step in range(2):
        with rbd.Image(volumes_pool, source) as image:
            image.write(bytes([step + 1]) * 5000, (2 + step) * MiB + 7)
        home = restore_point(stack, backup(stack, source)["restore_point_id"])
        assert home["kind"] == "incremental", home
        assert sorted(ceph.snapshots(volumes_pool, source)) == sorted(
            [f"cairn.{home['id']}", f"cairn.{away['id']}"])
    with rbd.Image(volumes_pool, source) as image:
        image.write(b"offsite" * 700, 7 * MiB)
    expected = ceph.sha256_of(volumes_pool, source)
    away = restore_point(stack, backup(stack, source, target="offsite")["restore_point_id"])
    assert away["kind"] == "incremental", away
    assert sorted(ceph.snapshots(volumes_pool, source)) == sorted(
        [f"cairn.{home['id']}", f"cairn.{away['id']}"])
    back = ceph.unique_name("twotargets-back")
    images.append(back)
    restore(stack, away["id"], back)
    assert ceph.sha256_of(volumes_pool, back) == expected


def test_a_cloned_volume_is_backed_up_with_its_parents_data(
        stack: Stack, volumes_pool: rados.Ioctx) -> None:
    parent = ceph.unique_name("golden")
    child = ceph.unique_name("clone")
    restored = ceph.unique_name("clone-restored")
    ceph.make_mixed_image(volumes_pool, parent, size=24 * MiB, seed=31)
    with rbd.Image(volumes_pool, parent) as image:
        image.create_snap("base")
        image.protect_snap("base")
    try:
        rbd.RBD().clone(volumes_pool, parent, "base", volumes_pool, child)
        with rbd.Image(volumes_pool, child) as image:
            image.write(ceph._Random(32).bytes(3 * MiB), 5 * MiB)  # the VM's own writes
        expected = ceph.sha256_of(volumes_pool, child)
        job = backup(stack, child)
        rp = restore_point(stack, job["restore_point_id"])
        # The parent's data counts: far more than the clone's own 3 MiB was read.
        assert rp["bytes_read"] > 12 * MiB
        restore(stack, rp["id"], restored)
        assert ceph.sha256_of(volumes_pool, restored) == expected
    finally:
        ceph.remove_image(volumes_pool, restored)
        ceph.remove_image(volumes_pool, child)
        with rbd.Image(volumes_pool, parent) as image:
            image.unprotect_snap("base")
        ceph.remove_image(volumes_pool, parent)
