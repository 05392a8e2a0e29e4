"""A restore point on a chunk target read at random (`worker/engine/chunk_reader.py`), over
a directory in tmp_path: backed up by the real upload (sealed chunks, a sealed manifest),
then random ranges read as the volume did, holes read as zeros without a fetch, a chunk
with a flipped byte or a missing chunk fails the read naming it and its offset, and the
decoded chunks kept stay within the cache's budget. Last, the directory kind's data path
hands out this reader (`DataPath.reader`): a third kind got it for nothing.

The source is an image in memory; the reader over every kind of a real stack is in
tests/integration/worker/test_reader.py."""

from __future__ import annotations

import gc
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from services.db import Database
from services.errors import DataCorrupt
from services.records.restore_points import RestorePoint
from services.settings import Settings
from services.storage.ceph import CephClusters
from services.storage.directory import Directory
from services.storage.object_layout import chunk_key
from worker.engine import object_copy
from worker.engine.block_reader import Extent
from worker.engine.chunk_reader import ChunkReader
from worker.engine.chunk_store import ChunkStore, ObjectManifest
from worker.runtime import Runtime
from worker.targets import data_path_of

OPERATOR_KEY = bytes(range(32))
PROJECT = "project-a"
RP = "0b5e4f9a-1111-4222-8333-944445555666"
CHUNK = 1 << 20
"""The smallest chunk a target may have (`SMALLEST_CHUNK`: what bounds a manifest's read)."""
ORDER = 21
"""2 MiB objects, two chunks each: the chunk, not the object, is the reader's block."""


class Volume:
    """An RBD snapshot in memory, as `object_copy.upload` reads one."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def size(self) -> int:
        return len(self.data)

    def stat(self) -> dict[str, int]:
        return {"order": ORDER}

    def read(self, offset: int, length: int, _flags: int = 0) -> bytes:
        return self.data[offset:offset + length]

    def diff_iterate(self, offset: int, length: int, _since: str | None,
                     on_extent: Callable[[int, int, bool], int], **_options: object) -> None:
        on_extent(offset, length, True)


class Counting(Directory):
    """A directory target's backend that counts the chunks fetched."""

    fetched = 0

    def get(self, key: str, *, limit: int) -> bytes | None:
        if key.startswith("chunks/"):
            self.fetched += 1
        return super().get(key, limit=limit)


def _volume(chunks: int, holes: set[int], tail: int = 54321) -> bytes:
    """`chunks` whole chunks of random (incompressible) data and a short last one, with
    all-zero chunks at `holes` and zeros inside chunk 1."""
    data = bytearray(random.Random(3404).randbytes(chunks * CHUNK + tail))
    for index in holes:
        data[index * CHUNK:(index + 1) * CHUNK] = bytes(CHUNK)
    data[CHUNK + 100:CHUNK + 50000] = bytes(49900)
    return bytes(data)


def _backed_up(db: Database, root: Path, data: bytes) -> tuple[ChunkStore, ObjectManifest]:
    """The volume backed up as a backup does it, and its manifest as stored (sealed)."""
    store = ChunkStore.open(db, Counting(root), "dir", OPERATOR_KEY, create=True)
    made = object_copy.upload(Volume(data), store, PROJECT,  # type: ignore[arg-type]
                              chunk_size=CHUNK, window=2)
    store.write_manifest(PROJECT, RP, made)
    return store, store.read_manifest(PROJECT, RP, len(data))


def _fetched(store: ChunkStore) -> int:
    assert isinstance(store.backend, Counting)
    return store.backend.fetched


def test_random_ranges_read_as_the_volume_did_and_holes_cost_no_fetch(
        db: Database, tmp_path: Path) -> None:
    holes = {2, 3, 6}
    data = _volume(8, holes)
    store, manifest = _backed_up(db, tmp_path, data)
    assert sorted(manifest.chunks) == [0, 1, 4, 5, 7, 8]
    rng = random.Random(3405)
    with ChunkReader(store, PROJECT, manifest, cache_bytes=2 * CHUNK, window=3) as reader:
        assert (reader.size, reader.block_size) == (len(data), CHUNK)
        assert reader.extents() == [Extent(0, 2 * CHUNK), Extent(4 * CHUNK, 2 * CHUNK),
                                    Extent(7 * CHUNK, len(data) - 7 * CHUNK)]
        for _ in range(60):
            offset = rng.randrange(len(data) + CHUNK)
            length = rng.choice([1, rng.randrange(CHUNK), rng.randrange(3 * CHUNK)])
            assert reader.read(offset, length) == data[offset:offset + length], (offset, length)
        assert reader.read(0, 2 * len(data)) == data
        before = _fetched(store)
        assert reader.read(2 * CHUNK, 2 * CHUNK) == bytes(2 * CHUNK)
        assert _fetched(store) == before  # a hole is zeros, nothing fetched


def test_a_flipped_byte_in_a_chunk_fails_the_read_naming_the_chunk_and_its_offset(
        db: Database, tmp_path: Path) -> None:
    data = _volume(6, set())
    store, manifest = _backed_up(db, tmp_path, data)
    name = manifest.chunks[4]
    path = tmp_path / chunk_key(PROJECT, name)
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    path.write_bytes(bytes(blob))
    with ChunkReader(store, PROJECT, manifest, window=4) as reader:
        with pytest.raises(DataCorrupt, match=f"the chunk at offset {4 * CHUNK} is corrupt: "
                                              f"chunk {name} fails its authentication tag"):
            reader.read(0, len(data))
        with pytest.raises(DataCorrupt, match=f"offset {4 * CHUNK}"):
            reader.read(4 * CHUNK + 10, 1)  # not cached: checked again, refused again
        assert reader.read(5 * CHUNK, CHUNK) == data[5 * CHUNK:6 * CHUNK]


def test_a_missing_chunk_fails_the_read_naming_it(db: Database, tmp_path: Path) -> None:
    data = _volume(4, set())
    store, manifest = _backed_up(db, tmp_path, data)
    name = manifest.chunks[2]
    (tmp_path / chunk_key(PROJECT, name)).unlink()
    with ChunkReader(store, PROJECT, manifest) as reader:
        assert reader.read(0, 2 * CHUNK) == data[:2 * CHUNK]
        with pytest.raises(DataCorrupt, match=f"the chunk at offset {2 * CHUNK} \\({name}\\) "
                                              "is missing from the target"):
            reader.read(2 * CHUNK + CHUNK - 1, 2)


def test_a_chunk_of_another_length_than_its_place_is_refused(db: Database,
                                                             tmp_path: Path) -> None:
    data = _volume(2, set())
    store, manifest = _backed_up(db, tmp_path, data)
    short = manifest.chunks[2]  # the volume's short last chunk, named in the first place
    misplaced = ObjectManifest(CHUNK, len(data), {0: short, 1: manifest.chunks[1]})
    with ChunkReader(store, PROJECT, misplaced) as reader, pytest.raises(
            DataCorrupt, match=f"the chunk at offset 0 \\({short}\\) holds 54321 bytes, "
                               f"not {CHUNK}"):
        reader.read(0, 1)


def test_the_chunks_kept_stay_within_the_cache_budget(db: Database, tmp_path: Path) -> None:
    data = _volume(10, set())
    store, manifest = _backed_up(db, tmp_path, data)
    budget = 2 * CHUNK
    with ChunkReader(store, PROJECT, manifest, cache_bytes=budget) as reader:
        gc.collect()
        tracemalloc.start()
        try:
            for index in range(11):
                reader.read(index * CHUNK + 7, 100)
                assert reader.cached_bytes <= budget
            _now, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # The budget, and a chunk on its way (the sealed blob, its plaintext): nowhere
        # near the 11 chunks read through.
        assert peak < budget + 5 * CHUNK, peak
        fetched = _fetched(store)
        reader.read(10 * CHUNK, 1)  # the most recent chunk is kept
        assert _fetched(store) == fetched
        reader.read(0, 1)  # the first went long ago
        assert _fetched(store) == fetched + 1


def test_a_directory_targets_data_path_hands_out_this_reader(db: Database,
                                                             tmp_path: Path) -> None:
    root = tmp_path / "target"
    root.mkdir()
    key_file = tmp_path / "operator.key"
    key_file.write_text(OPERATOR_KEY.hex())
    data = _volume(5, {1})
    store, _manifest = _backed_up(db, root, data)
    settings = Settings(auth_strategy="noauth", environment="development",
                        object_key_file=key_file,
                        directory_targets={"dir": {"path": str(root)}})
    rt = Runtime(settings, db, CephClusters(settings), "unit", None,  # type: ignore[arg-type]
                 None)  # type: ignore[arg-type]
    rp = RestorePoint(id=RP, project_id=PROJECT, target="dir", size_bytes=len(data),
                      key_fingerprint=store.key.fingerprint)
    with data_path_of(settings, "dir").reader(rt, rp, cache_bytes=CHUNK) as reader:
        assert isinstance(reader, ChunkReader)
        assert reader.read(CHUNK - 3, 2 * CHUNK) == data[CHUNK - 3:3 * CHUNK - 3]
        assert reader.extents()[0] == Extent(0, CHUNK)
        assert reader.cache_bytes == CHUNK
