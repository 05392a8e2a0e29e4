"""The backup checkpoint in real RADOS: what a retry may trust, and what it must not."""

from __future__ import annotations

import rados

from tests.support import ceph
from worker.engine import checkpoint
from worker.engine.manifest import digest


def test_a_checkpoint_returns_only_what_was_final_at_the_mark(backups_pool: rados.Ioctx) -> None:
    name = f"cairn.checkpoint.{ceph.unique_name('test')}"
    writer = checkpoint.CheckpointWriter(backups_pool, name, "full:64:4", None)
    digests: dict[int, bytes | None] = {0: digest(b"a"), 1: None, 2: digest(b"c"),
                                        5: digest(b"f")}
    writer.save(2, digests)      # 0 and 1 are final; 2 and 5 were still in flight
    digests[3] = digest(b"d")
    writer.save(4, digests)      # now 2 and 3 too
    try:
        loaded = checkpoint.load(backups_pool, name, "full:64:4")
        assert loaded is not None
        assert loaded.resume_index == 4
        assert loaded.digests == {0: digest(b"a"), 1: None, 2: digest(b"c"), 3: digest(b"d")}
        # A retry whose plan differs (another base, a resized volume) starts over.
        assert checkpoint.load(backups_pool, name, "base-x:64:4") is None
        # A writer resuming from it appends after what is there.
        resumed = checkpoint.CheckpointWriter(backups_pool, name, "full:64:4", loaded)
        resumed.save(6, {**digests, 4: None})
        again = checkpoint.load(backups_pool, name, "full:64:4")
        assert again is not None
        assert again.resume_index == 6
        assert again.digests[4] is None
        assert again.digests[5] == digest(b"f")
    finally:
        checkpoint.remove(backups_pool, name)
    assert checkpoint.load(backups_pool, name, "full:64:4") is None
