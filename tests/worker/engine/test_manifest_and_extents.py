from __future__ import annotations

import pytest

from services.errors import DataCorrupt
from worker.engine.extents import plan_chunks
from worker.engine.manifest import Manifest, digest


def test_manifest_round_trips() -> None:
    manifest = Manifest(object_size=4 << 20, image_size=10 << 20,
                        digests={0: digest(b"a"), 2: digest(b"c")})
    decoded = Manifest.decode(manifest.encode())
    assert decoded == manifest


def test_manifest_check_catches_changed_missing_and_unexpected_data() -> None:
    manifest = Manifest(4096, 3 * 4096, {0: digest(b"x" * 4096)})
    manifest.check(0, b"x" * 4096)
    manifest.check(1, None)  # zeros where nothing was recorded
    with pytest.raises(DataCorrupt, match="object 0"):
        manifest.check(0, b"y" * 4096)
    with pytest.raises(DataCorrupt):
        manifest.check(0, None)
    with pytest.raises(DataCorrupt):
        manifest.check(1, b"z")


def test_manifest_rejects_foreign_blobs() -> None:
    import zlib

    with pytest.raises(DataCorrupt):
        Manifest.decode(zlib.compress(b"NOTCAIRN" + bytes(20)))


def test_plan_covers_source_and_target_objects_in_order() -> None:
    chunks = plan_chunks(size=10 * 4, object_size=4, source={2, 0}, target={1, 2})
    assert [(c.index, c.offset, c.length, c.in_source, c.in_target) for c in chunks] == [
        (0, 0, 4, True, False),
        (1, 4, 4, False, True),
        (2, 8, 4, True, True),
    ]


def test_plan_trims_the_last_partial_object_and_ignores_objects_past_the_end() -> None:
    chunks = plan_chunks(size=10, object_size=4, source={2, 3})
    assert [(c.index, c.length) for c in chunks] == [(2, 2)]
