"""The chunk format (ADR 0007) kept in a directory instead of a bucket: the same store,
data key rules and garbage collection over `Directory`, with Cairn's database in SQLite.
What the object target's integration tests prove on RGW, in miniature and without a
server: the key is made once whoever races for it, a chunk round-trips sealed, a
tampered chunk names its offset, and a collection frees exactly what no manifest names."""

from __future__ import annotations

import math
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.db import Database
from services.errors import DataCorrupt, TargetKeyMissing
from services.storage import key_records
from services.storage.directory import Directory
from services.storage.object_layout import DATA_KEY, chunk_key
from worker.engine import chunk_gc
from worker.engine.chunk_store import ChunkStore, ObjectManifest

OPERATOR_KEY = bytes(range(32))
RP = "0b5e4f9a-1111-4222-8333-944445555666"
KiB = 1 << 10


def test_racing_first_backups_make_one_data_key_and_all_seal_with_it(
        db: Database, tmp_path: Path) -> None:
    directory = Directory(tmp_path)
    start = threading.Barrier(6)
    fingerprints: list[str] = []

    def first_backup() -> None:
        start.wait()
        store = ChunkStore.open(db, directory, "dir", OPERATOR_KEY, create=True)
        fingerprints.append(store.key.fingerprint)

    threads = [threading.Thread(target=first_backup) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    record = key_records.get(db, "dir")
    assert record is not None
    assert fingerprints == [record.fingerprint] * 6
    assert (tmp_path / DATA_KEY).read_bytes() == record.wrapped


def test_chunks_and_manifests_round_trip_and_a_flipped_byte_names_its_offset(
        db: Database, tmp_path: Path) -> None:
    store = ChunkStore.open(db, Directory(tmp_path), "dir", OPERATOR_KEY, create=True)
    data = os.urandom(64 * KiB)
    sealed = store.codec().seal_chunk("project-a", data)
    assert not store.has_chunk("project-a", sealed.name)
    store.put_chunk("project-a", sealed)
    assert store.has_chunk("project-a", sealed.name)
    manifest = ObjectManifest(64 * KiB, 128 * KiB, {1: sealed.name})
    store.write_manifest("project-a", RP, manifest)
    assert store.read_manifest("project-a", RP, 128 * KiB) == manifest
    assert store.get_chunk(store.codec(), "project-a", sealed.name, 64 * KiB, 64 * KiB) == data

    path = tmp_path / chunk_key("project-a", sealed.name)
    flipped = bytearray(path.read_bytes())
    flipped[len(flipped) // 2] ^= 1
    path.write_bytes(bytes(flipped))
    with pytest.raises(DataCorrupt, match="the chunk at offset 65536 is corrupt"):
        store.get_chunk(store.codec(), "project-a", sealed.name, 64 * KiB, 64 * KiB)
    path.unlink()
    with pytest.raises(DataCorrupt, match="is missing from the target"):
        store.get_chunk(store.codec(), "project-a", sealed.name, 64 * KiB, 64 * KiB)


def test_a_collection_frees_exactly_the_chunks_no_manifest_names(
        db: Database, tmp_path: Path) -> None:
    store = ChunkStore.open(db, Directory(tmp_path), "dir", OPERATOR_KEY, create=True)
    kept, freed = (store.codec().seal_chunk("project-a", os.urandom(KiB)) for _ in range(2))
    for sealed in (kept, freed):
        store.put_chunk("project-a", sealed)
    store.write_manifest("project-a", RP, ObjectManifest(KiB, 2 * KiB, {0: kept.name}))
    stats = chunk_gc.collect(store, {RP: 2 * KiB}, datetime.now(UTC) + timedelta(minutes=1),
                             deadline=math.inf)
    assert (stats.manifests, stats.chunks, stats.chunks_deleted) == (1, 2, 1)
    assert store.has_chunk("project-a", kept.name)
    assert not store.has_chunk("project-a", freed.name)


def test_a_directory_holding_chunks_without_its_key_gets_no_new_one(
        db: Database, tmp_path: Path) -> None:
    directory = Directory(tmp_path)
    directory.put(chunk_key("project-a", "ab" * 32), b"a chunk whose key is gone")
    with pytest.raises(TargetKeyMissing, match="holds chunks but no data key"):
        ChunkStore.open(db, directory, "dir", OPERATOR_KEY, create=True)
    assert directory.size(DATA_KEY) is None
