"""A retried upload to an object target trusts what its killed attempt confirmed stored,
and nothing more: the chunks below the checkpoint's mark are not looked up again, the mark
never passes a chunk still in flight, and a checkpoint of another plan, or saved before a
sweep of the target, or damaged, is ignored. The store is a directory (the chunk format
without a server) whose lookups are counted; the image is a recorder."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from services.db import Database
from services.limits import target_leases
from services.storage.directory import Directory
from services.storage.object_layout import checkpoint_key
from worker.engine import object_copy, upload_checkpoint
from worker.engine.chunk_store import ChunkStore
from worker.engine.upload_checkpoint import UploadCheckpoint

OPERATOR_KEY = bytes(range(32))
RP = "0b5e4f9a-1111-4222-8333-944445555666"
CHUNK = 64 << 10
CHUNKS = 24


class Image:
    """An image of CHUNKS chunks of random data (chunk 5 all zeros), one object each,
    whose reads take a random time: chunks in flight finish out of order."""

    def __init__(self) -> None:
        rng = random.Random(7)
        self.data = bytearray(rng.randbytes(CHUNKS * CHUNK))
        self.data[5 * CHUNK:6 * CHUNK] = bytes(CHUNK)

    def size(self) -> int:
        return len(self.data)

    def stat(self) -> dict[str, int]:
        return {"order": 16}

    def read(self, offset: int, length: int, _hints: int) -> bytes:
        time.sleep(random.random() / 1000)
        return bytes(self.data[offset:offset + length])


class Counting(ChunkStore):
    lookups = 0

    def has_chunk(self, project_id: str, name: str) -> bool:
        type(self).lookups += 1
        return super().has_chunk(project_id, name)


@pytest.fixture
def store(db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Counting:
    monkeypatch.setattr(object_copy, "allocated_objects", lambda _s, size, osize:
                        range((size + osize - 1) // osize))
    Counting.lookups = 0
    return Counting(db, Directory(tmp_path),
                    "dir", ChunkStore.open(db, Directory(tmp_path), "dir", OPERATOR_KEY,
                                           create=True).key)


def upload(store: ChunkStore, image: Image, **kwargs: Any) -> tuple[Any, object_copy.TransferStats]:
    stats = object_copy.TransferStats()
    manifest = object_copy.upload(image, store, "project-a", chunk_size=CHUNK, window=4,
                                  stats=stats, **kwargs)  # type: ignore[arg-type]
    return manifest, stats


def test_chunks_below_the_mark_are_not_looked_up_again_and_the_manifest_is_whole(
        store: Counting) -> None:
    image = Image()
    first, stats = upload(store, image)
    assert (Counting.lookups, stats.chunks_looked_up) == (CHUNKS - 1, CHUNKS - 1)

    Counting.lookups = 0
    again, stats = upload(store, image, confirmed_below=10)
    # Chunks 0-9 (one all zeros) were confirmed; 10-23 are asked for.
    assert (Counting.lookups, stats.chunks_looked_up, stats.chunks_confirmed) == (14, 14, 9)
    assert stats.chunks_uploaded == 0
    assert again.chunks == first.chunks


def test_the_mark_never_passes_a_chunk_still_in_flight(store: Counting) -> None:
    image = Image()
    seen: list[tuple[int, set[int]]] = []
    real = object_copy.ResumeMark.done

    def done(self: object_copy.ResumeMark, position: int) -> int:
        mark = real(self, position)
        seen.append((mark, set(finished) | {position}))
        finished.add(position)
        return mark

    finished: set[int] = set()
    object_copy.ResumeMark.done = done  # type: ignore[method-assign]
    try:
        upload(store, image)
    finally:
        object_copy.ResumeMark.done = real  # type: ignore[method-assign]
    for mark, finished_then in seen:
        assert set(range(mark)) <= finished_then, (mark, sorted(finished_then))
    assert seen[-1][0] == CHUNKS


def test_a_checkpoint_is_trusted_only_for_its_plan_and_sweep_count(store: Counting) -> None:
    plan = upload_checkpoint.plan_of("source snap 7", base=None, since=None,
                                     chunk_size=CHUNK, image_size=CHUNKS * CHUNK,
                                     key_fingerprint=store.key.fingerprint)
    assert upload_checkpoint.load(store, "project-a", RP, plan=plan, sweeps=3) == 0  # none
    upload_checkpoint.save(store, "project-a", RP, UploadCheckpoint(plan, 3, 12))
    assert upload_checkpoint.load(store, "project-a", RP, plan=plan, sweeps=3) == 12
    assert upload_checkpoint.load(store, "project-a", RP, plan=plan, sweeps=4) == 0
    other = upload_checkpoint.plan_of("source snap 8", base=None, since=None,
                                      chunk_size=CHUNK, image_size=CHUNKS * CHUNK,
                                      key_fingerprint=store.key.fingerprint)
    assert upload_checkpoint.load(store, "project-a", RP, plan=other, sweeps=3) == 0
    # Moved onto another restore point's name, it does not open.
    blob = store.backend.get(checkpoint_key("project-a", RP), limit=4096)
    assert blob is not None
    elsewhere = "0b5e4f9a-1111-4222-8333-000000000000"
    store.backend.put(checkpoint_key("project-a", elsewhere), blob)
    assert upload_checkpoint.load(store, "project-a", elsewhere, plan=plan, sweeps=3) == 0
    store.backend.put(checkpoint_key("project-a", RP), os.urandom(64))
    assert upload_checkpoint.load(store, "project-a", RP, plan=plan, sweeps=3) == 0
    upload_checkpoint.remove(store.backend, "project-a", RP)
    assert store.backend.size(checkpoint_key("project-a", RP)) is None


def test_only_a_taken_exclusive_lease_counts_as_a_sweep(db: Database) -> None:
    assert target_leases.sweeps(db, "dir") == 0
    shared = target_leases.try_acquire(db, "dir", "backup", exclusive=False, ttl_seconds=60)
    assert shared is not None
    # A collection waiting for the backup's lease has not swept: the count stays.
    assert target_leases.try_acquire(db, "dir", "gc", exclusive=True, ttl_seconds=60) is None
    assert target_leases.sweeps(db, "dir") == 0
    target_leases.release(db, shared)
    assert target_leases.try_acquire(db, "dir", "gc", exclusive=True, ttl_seconds=60)
    assert target_leases.sweeps(db, "dir") == 1
