"""The copy engine checks every object it reads with the manifest's one check
(`Manifest.check`, which the restore point's reader uses too): a verify lists each damaged
or lost object and reads on, a restore stops at the first and writes nothing wrong. The
images are in memory; the bytes' way through librbd is in the integration tier."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from services.errors import DataCorrupt
from worker.engine.copy import CopyEngine
from worker.engine.extents import plan_chunks
from worker.engine.manifest import Manifest, digest

OBJECT = 4096


class Image:
    """An image in memory: reads its bytes, records aio writes and zeroed ranges."""

    def __init__(self, data: bytes) -> None:
        self.data = bytearray(data)
        self.lock = threading.Lock()

    def read(self, offset: int, length: int, _flags: int = 0) -> bytes:
        return bytes(self.data[offset:offset + length])

    def aio_write(self, data: bytes, offset: int, on_complete: Any) -> None:
        with self.lock:
            self.data[offset:offset + len(data)] = data
        on_complete(Completion())

    def write_zeroes(self, offset: int, length: int) -> None:
        with self.lock:
            self.data[offset:offset + length] = bytes(length)


class Completion:
    def get_return_value(self) -> int:
        return 0


def _backed_up(objects: list[bytes]) -> tuple[bytes, Manifest]:
    data = b"".join(objects)
    digests = {i: digest(o) for i, o in enumerate(objects) if o.strip(b"\0")}
    return data, Manifest(OBJECT, len(data), digests)


def _damaged() -> tuple[Image, Manifest, list[int]]:
    """Five objects backed up (the third all zeros), then the second damaged and the
    fourth lost (it reads as zeros)."""
    objects = [bytes([n + 1]) * OBJECT for n in range(5)]
    objects[2] = bytes(OBJECT)
    data, manifest = _backed_up(objects)
    image = Image(data)
    image.data[OBJECT + 7] ^= 0x01
    image.data[3 * OBJECT:4 * OBJECT] = bytes(OBJECT)
    return image, manifest, [1, 3]


def test_a_verify_lists_every_damaged_or_lost_object_and_reads_them_all() -> None:
    image, manifest, damaged = _damaged()
    chunks = plan_chunks(len(image.data), OBJECT, range(5), manifest.digests)
    corrupt: list[int] = []
    stats = CopyEngine(window=3).run(image, None, chunks,  # type: ignore[arg-type]
                                     verify=manifest, corrupt=corrupt)
    assert sorted(corrupt) == damaged
    assert stats.bytes_read == 5 * OBJECT


def test_a_restore_stops_at_a_damaged_object_naming_it() -> None:
    image, manifest, _damaged_objects = _damaged()
    chunks = plan_chunks(len(image.data), OBJECT, range(5))
    restored = Image(bytes(len(image.data)))
    with pytest.raises(DataCorrupt, match=r"object 1 \(offset 4096\)"):
        CopyEngine(window=1).run(image, restored, chunks,  # type: ignore[arg-type]
                                 verify=manifest)
    assert restored.data[OBJECT:2 * OBJECT] == bytes(OBJECT)  # nothing of it written


def test_a_restore_of_an_intact_image_is_byte_for_byte() -> None:
    objects = [bytes([n + 1]) * OBJECT for n in range(4)] + [b"tail"]
    objects[1] = bytes(OBJECT)
    data, manifest = _backed_up(objects)
    restored = Image(b"\xff" * len(data))  # an existing image: its old bytes go
    chunks = plan_chunks(len(data), OBJECT, range(5), range(5))
    CopyEngine(window=2).run(Image(data), restored, chunks,  # type: ignore[arg-type]
                             verify=manifest)
    assert bytes(restored.data) == data
