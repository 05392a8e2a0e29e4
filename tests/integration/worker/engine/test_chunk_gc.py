"""Garbage collection on a real RGW: deleting restore points in any order releases exactly
the chunks no remaining manifest names; fresh and foreign objects stay."""

from __future__ import annotations

import itertools
import math
import os
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import rados
import rbd

from services.db import Database
from services.storage.s3 import Bucket
from tests.support import ceph
from tests.support.rgw import OPERATOR_KEY
from worker.engine import chunk_gc, object_copy, object_download
from worker.engine.chunk_store import ChunkStore, ObjectManifest

MiB = 1 << 20


def rp_id(label: str) -> str:
    """The id of the restore point a test calls `label`: a uuid, as Cairn's are (a
    manifest under any other name is not Cairn's, and marks nothing)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, label))


SIZES = {rp_id(f"rp{n}"): 24 * MiB for n in (1, 2, 3)}
"""The image sizes Cairn's rows would give the manifests' reads."""


def _future() -> datetime:
    """A cutoff after everything the test wrote: only references keep a chunk."""
    return datetime.now(UTC) + timedelta(minutes=5)


def _chain(io: rados.Ioctx, name: str, store: ChunkStore) -> dict[str, ObjectManifest]:
    """Three restore points of one volume: a full, then two incrementals that each rewrite
    one chunk and share the rest."""
    manifests: dict[str, ObjectManifest] = {}
    base: ObjectManifest | None = None
    for n in (1, 2, 3):
        with rbd.Image(io, name) as image:
            if n > 1:
                image.write(os.urandom(4 * MiB), n * 4 * MiB)
            image.create_snap(f"s{n}")
        with rbd.Image(io, name, snapshot=f"s{n}", read_only=True) as image:
            manifest = object_copy.upload(image, store, "p1", base=base,
                                          since=f"s{n - 1}" if n > 1 else None)
        store.write_manifest("p1", rp_id(f"rp{n}"), manifest)
        manifests[f"rp{n}"] = base = manifest
    return manifests


def _stored_names(bucket: Bucket) -> set[str]:
    return {stored.key.rsplit("/", 1)[1] for stored in bucket.list("chunks/", deadline=math.inf)}


@pytest.mark.parametrize("order", list(itertools.permutations(["rp1", "rp2", "rp3"])))
def test_deleting_restore_points_in_any_order_releases_exactly_the_unreferenced_chunks(
        volumes_pool: rados.Ioctx, images: list[str], bucket: Bucket, keys_db: Database,
        order: tuple[str, ...]) -> None:
    store = ChunkStore.open(keys_db, bucket, "gc-target", OPERATOR_KEY, create=True)
    name = ceph.random_image(volumes_pool, "gc-src", 24 * MiB, seed=1)
    images.append(name)
    manifests = _chain(volumes_pool, name, store)
    assert _stored_names(bucket) == set().union(*(m.names() for m in manifests.values()))
    remaining = dict(manifests)
    for rp in order:
        store.delete_manifest("p1", rp_id(rp))
        del remaining[rp]
        stats = chunk_gc.collect(store, SIZES, _future(), deadline=math.inf)
        expected = set().union(*(m.names() for m in remaining.values()))
        assert _stored_names(bucket) == expected
        assert stats.chunks_referenced == len(expected)
        # What is left restores byte for byte.
        for rp_left, manifest in remaining.items():
            assert object_download.verify(store, "p1", manifest)[1] == [], rp_left
    assert _stored_names(bucket) == set()


def test_a_chunk_newer_than_the_cutoff_stays_though_no_manifest_names_it(
        volumes_pool: rados.Ioctx, images: list[str], bucket: Bucket,
        keys_db: Database) -> None:
    """The grace period: a backup's chunks are stored before its manifest is."""
    store = ChunkStore.open(keys_db, bucket, "gc-target", OPERATOR_KEY, create=True)
    name = ceph.random_image(volumes_pool, "gc-new", 8 * MiB, seed=2)
    images.append(name)
    with rbd.Image(volumes_pool, name) as image:
        image.create_snap("s1")
    with rbd.Image(volumes_pool, name, snapshot="s1", read_only=True) as image:
        in_flight = object_copy.upload(image, store, "p1")  # no manifest written yet
    stats = chunk_gc.collect(store, SIZES, datetime.now(UTC) - timedelta(minutes=5),
                             deadline=math.inf)
    assert (stats.chunks_deleted, stats.chunks_too_new) == (0, 2)
    assert _stored_names(bucket) == in_flight.names()


def test_chunks_are_kept_per_project_and_strangers_are_left_alone(
        volumes_pool: rados.Ioctx, images: list[str], bucket: Bucket,
        keys_db: Database) -> None:
    store = ChunkStore.open(keys_db, bucket, "gc-target", OPERATOR_KEY, create=True)
    name = ceph.random_image(volumes_pool, "gc-proj", 8 * MiB, seed=3)
    images.append(name)
    with rbd.Image(volumes_pool, name) as image:
        image.create_snap("s1")
    with rbd.Image(volumes_pool, name, snapshot="s1", read_only=True) as image:
        for project in ("p1", "p2"):
            store.write_manifest(project, rp_id("rp"),
                                 object_copy.upload(image, store, project))
    bucket.put("chunks/p1/zz/not-a-chunk", b"someone else's")
    store.delete_manifest("p2", rp_id("rp"))
    stats = chunk_gc.collect(store, SIZES, _future(), deadline=math.inf)
    # p2's copies go although p1's manifest names the same data: names are per project.
    assert (stats.chunks_deleted, stats.chunks_referenced, stats.strangers) == (2, 2, 1)
    assert bucket.get("chunks/p1/zz/not-a-chunk", limit=MiB) == b"someone else's"
