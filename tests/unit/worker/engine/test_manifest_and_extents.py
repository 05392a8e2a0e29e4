from __future__ import annotations

import pytest

from services.errors import DataCorrupt
from worker.engine.extents import plan_chunks, resized_objects
from worker.engine.manifest import SHARD_OBJECTS, Manifest, digest


def test_manifest_shards_hold_every_entry_once() -> None:
    digests = {0: digest(b"a"), 2: digest(b"c"), SHARD_OBJECTS + 5: digest(b"d"),
               3 * SHARD_OBJECTS: digest(b"e")}
    manifest = Manifest(object_size=4 << 20, image_size=(4 * SHARD_OBJECTS) << 22,
                        digests=digests)
    shards = dict(manifest.shards())
    assert sorted(shards) == [0, 1, 3]  # an all-zero stretch costs no shard


def test_manifest_check_catches_changed_missing_and_unexpected_data() -> None:
    manifest = Manifest(4096, 3 * 4096, {0: digest(b"x" * 4096)})
    assert manifest.check(0, b"x" * 4096) == digest(b"x" * 4096)
    assert manifest.check(1, None) is None  # zeros where nothing was recorded
    assert manifest.check(1, bytes(4096)) is None  # read as zeros: the same
    with pytest.raises(DataCorrupt, match=r"object 0 \(offset 0\)"):
        manifest.check(0, b"y" * 4096)
    with pytest.raises(DataCorrupt):
        manifest.check(0, None)
    with pytest.raises(DataCorrupt, match="object 0"):
        manifest.check(0, bytes(4096))  # a lost object reads as zeros
    with pytest.raises(DataCorrupt, match=r"object 1 \(offset 4096\)"):
        manifest.check(1, b"z")


def test_an_incremental_manifest_applies_changes_zeroes_and_a_new_size() -> None:
    base = Manifest(4, 16, {0: digest(b"a"), 1: digest(b"b"), 3: digest(b"d")})
    new = base.updated({1: None, 2: digest(b"C"), 5: digest(b"F")}, image_size=24)
    assert new.digests == {0: digest(b"a"), 2: digest(b"C"), 3: digest(b"d"), 5: digest(b"F")}
    shrunk = new.updated({}, image_size=9)  # objects 0..2 remain
    assert sorted(shrunk.digests) == [0, 2]


def test_plan_covers_source_and_target_objects_in_order() -> None:
    chunks = plan_chunks(size=10 * 4, object_size=4, source={2, 0}, target={1, 2})
    assert [(c.index, c.offset, c.length, c.in_source, c.in_target) for c in chunks] == [
        (0, 0, 4, True, False),
        (1, 4, 4, False, True),
        (2, 8, 4, True, True),
    ]


def test_an_incremental_plan_keeps_only_changed_objects_with_something_to_do() -> None:
    chunks = plan_chunks(size=10 * 4, object_size=4, source={0, 1, 2, 5}, target={0, 1, 3},
                         only={1, 3, 4, 5})
    # 4 changed but is empty on both sides: nothing to write or clear.
    assert [(c.index, c.in_source, c.in_target) for c in chunks] == [
        (1, True, True), (3, False, True), (5, True, False)]


def test_a_resumed_plan_starts_at_the_checkpoint() -> None:
    chunks = plan_chunks(size=10 * 4, object_size=4, source=range(10), start=6)
    assert [c.index for c in chunks] == [6, 7, 8, 9]


def test_plan_trims_the_last_partial_object_and_ignores_objects_past_the_end() -> None:
    chunks = plan_chunks(size=10, object_size=4, source={2, 3})
    assert [(c.index, c.length) for c in chunks] == [(2, 2)]


@pytest.mark.parametrize(("old", "new", "expected"), [
    (10, 10, set()),            # no resize
    (10, 24, {2}),              # grow: the old partial last object is now whole
    (10, 22, {2, 5}),           # and the new last object is partial
    (8, 12, set()),             # aligned grow: no object changed length
    (22, 10, {2}),              # shrink into an object: it is cut
    (22, 8, set()),             # aligned shrink: objects past the end just go
    (3, 1, {0}),                # within the first object
    (0, 5, {1}),                # from empty
])
def test_resized_objects_are_those_whose_length_changed(old: int, new: int,
                                                        expected: set[int]) -> None:
    assert resized_objects(old, new, object_size=4) == expected


def test_manifest_check_shape_refuses_another_image() -> None:
    manifest = Manifest(4096, 3 * 4096 + 1)
    manifest.check_shape(3 * 4096 + 1, 4096)
    with pytest.raises(DataCorrupt, match="12289-byte image"):
        manifest.check_shape(3 * 4096, 4096)
