"""An object target's download: many chunks fetched at once and opened on other threads,
never more held than its bound, never further past its checkpoint than its span; resumed,
it fetches only the chunks its checkpoint does not name as written; the checkpoint it
reports never passes a chunk that is not written yet, however the chunks in flight finish;
a corrupt chunk fails it with its offset and is not written. The store and the image are
recorders; the bytes' way through a real bucket is in
tests/integration/worker/engine/test_object_copy.py."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest

from services.errors import DataCorrupt
from worker.engine.chunk_store import ObjectManifest
from worker.engine.copy import CopyStats
from worker.engine.fetch_window import Limits
from worker.engine.object_download import download, verify

CHUNK = 1 << 20


class Store:
    """Hands back each chunk after a random pause (chunks in flight finish out of order),
    recording what was fetched, on which threads, and how many chunks are held (fetched,
    or being fetched, and not yet written) at most. `corrupt`: names that fail to open."""

    def __init__(self, seed: int = 0, corrupt: frozenset[str] = frozenset(),
                 pause: float = 0.0) -> None:
        self.rng = random.Random(seed)
        self.pause = pause
        self.lock = threading.Lock()
        self.corrupt = corrupt
        self.fetched: list[str] = []
        self.fetching = self.most_fetching = self.held = self.most_held = 0
        self.threads: dict[str, set[str]] = {"fetch": set(), "open": set()}

    def codec(self) -> None:
        return None

    def fetch_chunk(self, project_id: str, name: str, offset: int,
                    length: int) -> bytes | None:
        with self.lock:
            pause = self.pause + self.rng.random() / 500
            self.fetched.append(name)
            self.threads["fetch"].add(threading.current_thread().name)
            self.fetching += 1
            self.held += 1
            self.most_fetching = max(self.most_fetching, self.fetching)
            self.most_held = max(self.most_held, self.held)
        time.sleep(pause)
        with self.lock:
            self.fetching -= 1
        return name.encode()

    def open_chunk(self, codec: Any, project_id: str, name: str, offset: int, length: int,
                   blob: bytes | None) -> bytes:
        with self.lock:
            self.threads["open"].add(threading.current_thread().name)
        if name in self.corrupt:
            raise DataCorrupt(f"the chunk at offset {offset} is corrupt: tag")
        assert blob is not None
        return blob.ljust(length, b".")

    def written(self) -> None:
        with self.lock:
            self.held -= 1


class Completion:
    def __init__(self, value: int) -> None:
        self.value = value

    def get_return_value(self) -> int:
        return self.value


class Image:
    def __init__(self, store: Store | None = None, pause: float = 0.0) -> None:
        self.lock = threading.Lock()
        self.written: dict[int, bytes] = {}
        self.zeroed: list[int] = []
        self.store = store
        self.pause = pause

    def aio_write(self, data: bytes, offset: int, on_complete: Any) -> None:
        time.sleep(self.pause)
        with self.lock:
            self.written[offset // CHUNK] = bytes(data)
        if self.store is not None:
            self.store.written()
        on_complete(Completion(0))

    def write_zeroes(self, offset: int, length: int) -> None:
        with self.lock:
            self.zeroed.append(offset // CHUNK)


class Progress:
    """Checks, at every tick, that every chunk the download has to write (from `start` on;
    a new image's holes need nothing) before the reported checkpoint is written."""

    def __init__(self, image: Image, manifest: ObjectManifest, *, start: int = 0,
                 new: bool = False) -> None:
        self.image, self.manifest, self.start, self.new = image, manifest, start, new
        self.began: CopyStats | None = None
        self.marks: list[int] = []

    def begin(self, stats: CopyStats) -> None:
        self.began = stats

    def tick(self, stats: CopyStats) -> None:
        with self.image.lock:
            done = set(self.image.written) | set(self.image.zeroed)
        pending = [i for i in range(self.start, stats.resume_index) if i not in done
                   and (i in self.manifest.chunks or not self.new)]
        assert not pending, f"checkpoint {stats.resume_index} passes unwritten {pending}"
        self.marks.append(stats.resume_index)


def _manifest(chunks: int, holes: set[int]) -> ObjectManifest:
    manifest = ObjectManifest(CHUNK, chunks * CHUNK)
    manifest.chunks = {i: f"c{i}" for i in range(chunks) if i not in holes}
    return manifest


def test_a_resumed_download_writes_from_its_checkpoint_on() -> None:
    manifest = _manifest(12, holes={2, 9})
    image = Image()
    progress = Progress(image, manifest, start=5)
    stats = download(Store(), "p", manifest, image, target_is_new=False,  # type: ignore[arg-type]
                     start=5, fetches=4, progress=progress)
    assert sorted(image.written) == [5, 6, 7, 8, 10, 11]
    assert image.zeroed == [9]  # a hole from the checkpoint on is cleared; 2 was before
    assert image.written[7].startswith(b"c7")
    assert progress.began is not None
    assert progress.began.bytes_resumed == 4 * CHUNK  # chunks 0, 1, 3, 4
    assert (stats.bytes_resumed, stats.bytes_done, stats.bytes_total) == (
        4 * CHUNK, 10 * CHUNK, 10 * CHUNK)
    assert stats.resume_index == 12


def test_the_checkpoint_never_passes_a_chunk_still_in_flight() -> None:
    manifest = _manifest(60, holes={0, 13, 14, 40})
    for target_is_new in (True, False):
        image = Image()
        progress = Progress(image, manifest, new=target_is_new)
        download(Store(seed=7), "p", manifest, image,  # type: ignore[arg-type]
                 target_is_new=target_is_new, fetches=8, opens=2, writes=3,
                 progress=progress)
        assert progress.marks == sorted(progress.marks)
        assert progress.marks[-1] == 60


def test_many_fetches_in_flight_opened_elsewhere_and_no_more_held_than_the_bound() -> None:
    manifest = _manifest(80, holes={3, 50})
    limits = Limits(fetches=10, opens=2, writes=2)
    assert Limits(16, 2, 16).held_bytes(4 << 20) >> 20 == 144  # download's docstring
    # A slow store and a fast destination, then a destination the fetches must wait for.
    for fetch, pause in ((0.02, 0.0), (0.0, 0.003)):
        store = Store(seed=3, pause=fetch)
        image = Image(store, pause=pause)
        stats = download(store, "p", manifest, image,  # type: ignore[arg-type]
                         target_is_new=True, fetches=10, opens=2, writes=2)
        assert sorted(image.written) == sorted(manifest.chunks)
        assert image.written[41] == b"c41".ljust(CHUNK, b".")
        if pause:
            assert store.most_held == limits.held
        else:
            assert store.most_fetching == limits.fetches
        # Opening happens on threads of its own, as many as asked, never on a fetch thread.
        assert not store.threads["fetch"] & store.threads["open"]
        assert len(store.threads["open"]) <= 2
        assert (stats.bytes_read, stats.bytes_done, stats.resume_index) == (
            78 * CHUNK, 78 * CHUNK, 80)


def test_a_resumed_download_fetches_nothing_its_checkpoint_names() -> None:
    manifest = _manifest(20, holes={2, 12})
    image = Image()
    store = Store()
    stats = download(store, "p", manifest, image, target_is_new=False,  # type: ignore[arg-type]
                     start=5, done={7, 10, 3}, fetches=4)
    assert sorted(store.fetched) == sorted(f"c{i}" for i in {*range(5, 20)} - {7, 10, 12})
    assert sorted(image.written) == sorted({*range(5, 20)} - {7, 10, 12})
    assert image.zeroed == [12]
    # 0, 1, 3, 4 before the checkpoint, 7 and 10 past it (3 was before it anyway).
    assert stats.bytes_resumed == 6 * CHUNK
    assert (stats.bytes_read, stats.bytes_done) == (12 * CHUNK, 18 * CHUNK)


class Stalled(Store):
    """The first chunk's fetch waits until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.while_stalled: list[int] = []

    def fetch_chunk(self, project_id: str, name: str, offset: int,
                    length: int) -> bytes | None:
        if name == "c0":
            self.release.wait(timeout=5)
        elif not self.release.is_set():
            self.while_stalled.append(offset // CHUNK)
        return super().fetch_chunk(project_id, name, offset, length)


def test_a_stalled_chunk_holds_the_rest_within_the_span_and_the_checkpoint_small() -> None:
    limits = Limits(fetches=2, opens=1, writes=1)  # held 4, span 16
    manifest = _manifest(40, holes=set())
    store = Stalled()
    image = Image()
    seen: list[CopyStats] = []

    class Watch:
        def begin(self, stats: CopyStats) -> None:
            pass

        def tick(self, stats: CopyStats) -> None:
            seen.append(CopyStats(resume_index=stats.resume_index,
                                  resume_done=stats.resume_done))
            if len(stats.resume_done) == limits.span - 1:
                store.release.set()  # everything the span allows is done: let 0 finish

    download(store, "p", manifest, image, target_is_new=True,  # type: ignore[arg-type]
             fetches=2, opens=1, writes=1, progress=Watch())
    assert store.release.is_set()
    assert max(store.while_stalled) == limits.span - 1
    assert max(len(s.resume_done) for s in seen) == limits.span - 1
    stalled = [s for s in seen if s.resume_index == 0 and s.resume_done]
    assert stalled[-1].resume_done == tuple(range(1, limits.span))
    assert seen[-1].resume_index == 40
    assert seen[-1].resume_done == ()
    assert sorted(image.written) == list(range(40))


def test_a_corrupt_chunk_fails_the_download_with_its_offset_and_is_not_written() -> None:
    manifest = _manifest(30, holes=set())
    image = Image()
    with pytest.raises(DataCorrupt, match=f"chunk at offset {9 * CHUNK} is corrupt"):
        download(Store(corrupt=frozenset({"c9"})), "p", manifest, image,  # type: ignore[arg-type]
                 target_is_new=True, fetches=6)
    assert 9 not in image.written


def test_verify_lists_every_corrupt_chunk_and_reads_the_rest() -> None:
    manifest = _manifest(30, holes={4})
    store = Store(corrupt=frozenset({"c9", "c21"}))
    stats, found = verify(store, "p", manifest, fetches=6)  # type: ignore[arg-type]
    assert [offset for offset, _reason in found] == [9 * CHUNK, 21 * CHUNK]
    assert len(store.fetched) == 29
    assert stats.bytes_done == 29 * CHUNK
