"""RBD snapshots to a real S3 endpoint (Ceph RGW) and back, byte for byte: full and
incremental chains over grown and shrunk volumes, sparse and odd-sized data, clones, a
repeated full, tampered chunks and the wrong key."""

from __future__ import annotations

import hashlib
import math
import os

import pytest
import rados
import rbd

from services.db import Database
from services.errors import DataCorrupt, StorageUnavailable, TargetKeyUnavailable
from services.storage.object_layout import DATA_KEY, chunk_key
from services.storage.s3 import Bucket
from tests.support import ceph
from tests.support.rgw import OPERATOR_KEY
from worker.engine import object_copy, object_download
from worker.engine.chunk_store import ChunkStore, ObjectManifest
from worker.engine.object_copy import TransferStats

MiB = 1 << 20


@pytest.fixture
def store(bucket: Bucket, keys_db: Database) -> ChunkStore:
    return ChunkStore.open(keys_db, bucket, "offsite-s3", OPERATOR_KEY, create=True)


def _snap(io: rados.Ioctx, name: str, snap: str) -> None:
    with rbd.Image(io, name) as image:
        image.create_snap(snap)


def _upload(io: rados.Ioctx, name: str, snap: str, store: ChunkStore, project: str = "p1", *,
            base: ObjectManifest | None = None, since: str | None = None,
            chunk_size: int = 4 * MiB) -> tuple[ObjectManifest, TransferStats]:
    stats = TransferStats()
    with rbd.Image(io, name, snapshot=snap, read_only=True) as image:
        manifest = object_copy.upload(image, store, project, base=base, since=since,
                                      chunk_size=chunk_size, stats=stats)
    return manifest, stats


def _snapshotted(io: rados.Ioctx, images: list[str], prefix: str, size: int,
                 seed: int) -> str:
    """A new image of random data with snapshot `s1`; removed after the test."""
    name = ceph.random_image(io, prefix, size, seed=seed)
    images.append(name)
    _snap(io, name, "s1")
    return name


def _restore_sha(io: rados.Ioctx, store: ChunkStore, manifest: ObjectManifest,
                 images: list[str], project: str = "p1") -> str:
    name = ceph.unique_name("s3-restore")
    images.append(name)
    rbd.RBD().create(io, name, manifest.image_size)
    with rbd.Image(io, name) as target:
        object_download.download(store, project, manifest, target, target_is_new=True)
    return ceph.sha256_of(io, name)


@pytest.mark.parametrize("chunk_size", [4 * MiB, 1 * MiB])
def test_a_chain_of_full_and_incrementals_restores_byte_for_byte(
        volumes_pool: rados.Ioctx, images: list[str], store: ChunkStore,
        chunk_size: int) -> None:
    size = 40 * MiB + 12_345  # not a multiple of the object or chunk size
    name = ceph.unique_name("s3-src")
    images.append(name)
    ceph.make_mixed_image(volumes_pool, name, size=size, seed=11)
    _snap(volumes_pool, name, "s1")
    full, stats = _upload(volumes_pool, name, "s1", store, chunk_size=chunk_size)
    assert stats.chunks_uploaded > 0
    assert _restore_sha(volumes_pool, store, full, images) == ceph.sha256_of(
        volumes_pool, name, "s1")
    # The holes of the source stay holes: nothing is stored for them.
    assert len(full.chunks) * chunk_size < size

    with rbd.Image(volumes_pool, name) as image:
        # Grow: the old partial last chunk is now whole (its new tail reads as zeros),
        # although nothing was written to it; write past the old end and inside.
        image.resize(size + 9 * MiB + 777)
        image.write(os.urandom(5000), size + 5 * MiB)
        image.write(os.urandom(3 * MiB), 20 * MiB + 5)
        image.write(bytes(4 * MiB), 0)  # data overwritten with zeros
    _snap(volumes_pool, name, "s2")
    grown, stats = _upload(volumes_pool, name, "s2", store, base=full, since="s1",
                           chunk_size=chunk_size)
    # Three objects were written, and the last chunks of the old and new size changed
    # length: only those are read again.
    assert stats.bytes_read <= 5 * 4 * MiB, "an incremental reads only what changed"
    assert _restore_sha(volumes_pool, store, grown, images) == ceph.sha256_of(
        volumes_pool, name, "s2")

    with rbd.Image(volumes_pool, name) as image:  # shrink into the middle of a data chunk
        image.resize(20 * MiB + 4097)
    _snap(volumes_pool, name, "s3")
    shrunk, _ = _upload(volumes_pool, name, "s3", store, base=grown, since="s2",
                        chunk_size=chunk_size)
    assert _restore_sha(volumes_pool, store, shrunk, images) == ceph.sha256_of(
        volumes_pool, name, "s3")
    # Every manifest stands alone: the first and the grown one still restore exactly.
    assert _restore_sha(volumes_pool, store, full, images) == ceph.sha256_of(
        volumes_pool, name, "s1")


def test_a_repeated_full_of_unchanged_data_uploads_no_chunk(
        volumes_pool: rados.Ioctx, images: list[str], store: ChunkStore) -> None:
    name = _snapshotted(volumes_pool, images, "s3-same", 24 * MiB + 4096, seed=3)
    first, stats = _upload(volumes_pool, name, "s1", store)
    assert stats.chunks_uploaded == 7
    again, stats = _upload(volumes_pool, name, "s1", store)  # no base: finds them by name
    assert (stats.chunks_uploaded, stats.chunks_known, stats.bytes_sent) == (0, 7, 0)
    assert again.chunks == first.chunks
    # A chunk the caller says is there is not looked up: one deleted behind the engine's
    # back shows that it was trusted, not sent again.
    store.backend.delete(chunk_key("p1", first.chunks[0]))
    trusted = TransferStats()
    with rbd.Image(volumes_pool, name, snapshot="s1", read_only=True) as image:
        object_copy.upload(image, store, "p1", known=first.names(), stats=trusted)
    assert (trusted.chunks_uploaded, trusted.chunks_known) == (0, 7)


def test_a_clone_shares_its_parents_chunks_within_a_project_and_not_across(
        volumes_pool: rados.Ioctx, store: ChunkStore, bucket: Bucket) -> None:
    parent = ceph.random_image(volumes_pool, "s3-parent", 16 * MiB, seed=5)
    clone, restored = ceph.unique_name("s3-clone"), []
    with rbd.Image(volumes_pool, parent) as image:
        image.create_snap("base")
        image.protect_snap("base")
    try:
        rbd.RBD().clone(volumes_pool, parent, "base", volumes_pool, clone)
        with rbd.Image(volumes_pool, clone) as image:
            image.write(os.urandom(MiB), 5 * MiB)
            image.create_snap("s1")
        _, parent_stats = _upload(volumes_pool, parent, "base", store)
        manifest, clone_stats = _upload(volumes_pool, clone, "s1", store)
        assert parent_stats.chunks_uploaded == 4
        # The clone reads its parent's data too, but only its own changed chunk is sent.
        assert (clone_stats.chunks_uploaded, clone_stats.chunks_known) == (1, 3)
        assert _restore_sha(volumes_pool, store, manifest, restored) == ceph.sha256_of(
            volumes_pool, clone, "s1")
        # Another project backing up the same bytes stores chunks of its own: no dedup
        # across projects, so nobody learns from the store what another project holds.
        _, other = _upload(volumes_pool, parent, "base", store, project="p2")
        assert other.chunks_uploaded == 4
        assert len(list(bucket.list("chunks/", deadline=math.inf))) == 9
    finally:
        for name in [*restored, clone]:
            ceph.remove_image(volumes_pool, name)
        with rbd.Image(volumes_pool, parent) as image:
            image.unprotect_snap("base")
        ceph.remove_image(volumes_pool, parent)


def test_a_tampered_or_missing_chunk_is_found_by_verify_and_refused_by_restore(
        volumes_pool: rados.Ioctx, images: list[str], store: ChunkStore,
        bucket: Bucket) -> None:
    name = _snapshotted(volumes_pool, images, "s3-tamper", 12 * MiB, seed=8)
    manifest, _ = _upload(volumes_pool, name, "s1", store)
    assert object_download.verify(store, "p1", manifest)[1] == []
    second, third = manifest.chunks[1], manifest.chunks[2]
    blob = bucket.get(chunk_key("p1", second), limit=8 * MiB)
    assert blob is not None
    bucket.put(chunk_key("p1", second), blob[:-1] + bytes([blob[-1] ^ 1]))  # one bit
    bucket.delete(chunk_key("p1", third))
    found = object_download.verify(store, "p1", manifest)[1]
    assert [offset for offset, _ in found] == [4 * MiB, 8 * MiB]
    assert "authentication" in found[0][1]
    assert "missing" in found[1][1]
    # Chunks are fetched in parallel: the restore stops at whichever bad one comes first.
    with pytest.raises(DataCorrupt, match=f"offset ({4 * MiB}|{8 * MiB})"):
        _restore_sha(volumes_pool, store, manifest, images)


@pytest.mark.parametrize("fetches", [1, 16])
def test_an_odd_sized_sparse_image_restores_byte_exact_and_sparse_at_any_fetches_in_flight(
        volumes_pool: rados.Ioctx, images: list[str], store: ChunkStore, fetches: int) -> None:
    size = 72 * MiB + 12_345  # not a multiple of the chunk size; holes, zeros inside data
    name = ceph.unique_name("s3-fetches")
    images.append(name)
    ceph.make_mixed_image(volumes_pool, name, size=size, seed=21)
    _snap(volumes_pool, name, "s1")
    manifest, _ = _upload(volumes_pool, name, "s1", store, chunk_size=1 * MiB)
    restored = ceph.unique_name("s3-fetched")
    images.append(restored)
    rbd.RBD().create(volumes_pool, restored, size)
    with rbd.Image(volumes_pool, restored) as target:
        stats = object_download.download(store, "p1", manifest, target, target_is_new=True,
                                         fetches=fetches, writes=4)
    assert ceph.sha256_of(volumes_pool, restored) == ceph.sha256_of(volumes_pool, name, "s1")
    assert stats.bytes_read == sum(min(MiB, size - i * MiB) for i in manifest.chunks)
    # Holes, and zeros inside the chunks, stay unwritten on a new image: no more is
    # allocated than the source's data, each run of it counted in whole 4 KiB blocks (the
    # copy engine's grain; the source was written at any byte).
    assert ceph.allocated_bytes(volumes_pool, restored) <= _in_blocks(volumes_pool, name, "s1")


def _in_blocks(io: rados.Ioctx, name: str, snapshot: str, block: int = 4096) -> int:
    """The bytes of the image's allocated extents, each widened to whole blocks."""
    total = 0

    def on_extent(offset: int, length: int, exists: bool) -> int:
        nonlocal total
        if exists:
            total += -(-(offset + length) // block) * block - offset // block * block
        return 0

    with rbd.Image(io, name, snapshot=snapshot, read_only=True) as image:
        image.diff_iterate(0, image.size(), None, on_extent)
    return total


def test_a_corrupt_chunk_fails_the_restore_and_nothing_of_it_is_written(
        volumes_pool: rados.Ioctx, images: list[str], store: ChunkStore,
        bucket: Bucket) -> None:
    name = _snapshotted(volumes_pool, images, "s3-corrupt", 24 * MiB, seed=22)
    manifest, _ = _upload(volumes_pool, name, "s1", store, chunk_size=1 * MiB)
    key = chunk_key("p1", manifest.chunks[13])
    blob = bucket.get(key, limit=8 * MiB)
    assert blob is not None
    bucket.put(key, blob[:-1] + bytes([blob[-1] ^ 1]))
    restored = ceph.unique_name("s3-corrupt-restore")
    images.append(restored)
    rbd.RBD().create(volumes_pool, restored, manifest.image_size)
    with rbd.Image(volumes_pool, restored) as target:
        with pytest.raises(DataCorrupt, match=f"offset {13 * MiB} is corrupt"):
            object_download.download(store, "p1", manifest, target, target_is_new=True,
                                     fetches=16)
        assert target.read(13 * MiB, MiB) == bytes(MiB)


def test_restore_in_place_zeroes_what_the_restore_point_does_not_hold(
        volumes_pool: rados.Ioctx, images: list[str], store: ChunkStore) -> None:
    size = 20 * MiB + 3
    name = ceph.unique_name("s3-inplace")
    images.append(name)
    ceph.make_mixed_image(volumes_pool, name, size=size, seed=4)
    _snap(volumes_pool, name, "s1")
    manifest, _ = _upload(volumes_pool, name, "s1", store)
    expected = ceph.sha256_of(volumes_pool, name, "s1")
    with rbd.Image(volumes_pool, name) as image:
        image.write(b"\xff" * size, 0)  # every byte differs now, holes included
        object_download.download(store, "p1", manifest, image, target_is_new=False,
                                  fetches=16)
    assert ceph.sha256_of(volumes_pool, name) == expected


def test_without_the_operator_key_nothing_is_read(
        volumes_pool: rados.Ioctx, images: list[str], store: ChunkStore,
        bucket: Bucket, keys_db: Database) -> None:
    name = _snapshotted(volumes_pool, images, "s3-key", 4 * MiB, seed=9)
    manifest, _ = _upload(volumes_pool, name, "s1", store)
    store.write_manifest("p1", "rp-1", manifest)
    assert store.read_manifest("p1", "rp-1", 4 * MiB).chunks == manifest.chunks
    with pytest.raises(TargetKeyUnavailable, match="not the key the target was made with"):
        ChunkStore.open(keys_db, bucket, "offsite-s3", os.urandom(32))
    with pytest.raises(TargetKeyUnavailable, match="no operator key"):
        ChunkStore.open(keys_db, bucket, "offsite-s3", None)
    # The key is kept only wrapped: the raw data key appears nowhere in the bucket.
    wrapped = bucket.get(DATA_KEY, limit=1024)
    assert wrapped is not None
    assert len(wrapped) == 8 + 12 + 32 + 16
    # Reopened with the right key (a new worker), everything reads back.
    reopened = ChunkStore.open(keys_db, bucket, "offsite-s3", OPERATOR_KEY)
    again = reopened.read_manifest("p1", "rp-1", 4 * MiB)
    assert object_download.verify(reopened, "p1", again)[1] == []


def test_an_unwritten_target_is_not_made_by_a_read(bucket: Bucket,
                                                   keys_db: Database) -> None:
    with pytest.raises(StorageUnavailable, match="holds no data key"):
        ChunkStore.open(keys_db, bucket, "offsite-s3", OPERATOR_KEY)
    assert list(bucket.list(deadline=math.inf)) == []


def test_stored_chunks_are_sealed_not_plain(
        volumes_pool: rados.Ioctx, images: list[str], store: ChunkStore,
        bucket: Bucket) -> None:
    name = _snapshotted(volumes_pool, images, "s3-plain", 4 * MiB, seed=10)
    manifest, _ = _upload(volumes_pool, name, "s1", store)
    blob = bucket.get(chunk_key("p1", manifest.chunks[0]), limit=8 * MiB)
    assert blob is not None
    with rbd.Image(volumes_pool, name, snapshot="s1", read_only=True) as image:
        plain = image.read(0, 4 * MiB)
    assert plain[:4096] not in blob
    assert hashlib.sha256(plain).hexdigest() != manifest.chunks[0]  # keyed, not plain sha
