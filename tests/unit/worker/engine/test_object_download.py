"""An object target's download, resumed: it writes only the chunks from its checkpoint on,
counts the ones before as resumed, and the checkpoint it reports never passes a chunk that
is not written yet, however the chunks in flight finish. The store and the image are
recorders; the bytes' way through a real bucket is in
tests/integration/worker/engine/test_object_copy.py."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from worker.engine.chunk_store import ObjectManifest
from worker.engine.copy import CopyStats
from worker.engine.object_copy import download

CHUNK = 1 << 20


class Store:
    """Hands back each chunk's bytes after a random pause: chunks in flight finish out of
    order."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def codec(self) -> None:
        return None

    def get_chunk(self, codec: Any, project_id: str, name: str, offset: int,
                  length: int) -> bytes:
        with self.lock:
            pause = self.rng.random() / 500
        time.sleep(pause)
        return name.encode().ljust(length, b".")


class Completion:
    def __init__(self, value: int) -> None:
        self.value = value

    def get_return_value(self) -> int:
        return self.value


class Image:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.written: dict[int, bytes] = {}
        self.zeroed: list[int] = []

    def aio_write(self, data: bytes, offset: int, on_complete: Any) -> None:
        with self.lock:
            self.written[offset // CHUNK] = bytes(data)
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
                     start=5, window=4, progress=progress)
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
                 target_is_new=target_is_new, window=8, progress=progress)
        assert progress.marks == sorted(progress.marks)
        assert progress.marks[-1] == 60
