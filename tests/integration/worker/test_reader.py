"""The restore point reader (issue 33, item 2) on every kind of target the stacks configure:
the RBD pool `local`, the object target `s3` on the local RGW and the directory target
`dir`. A volume of odd size with holes and zeros written inside its data is backed up
through the API, then read through its kind's `DataPath.reader`, as a file-level restore
will read it: seeded random ranges, and the whole, hash as the source volume does at the
restore point's snapshot; the extents cover all its data and leave out its hole; and a
byte flipped in one stored block fails every read that touches that block, naming it and
its offset, while the other blocks still read.

What differs between the kinds is only how the test damages a stored block: `_damage_rbd`
and `_damage_chunk` below."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator

import pytest
import rados
import rbd

from services import targets
from services.clock import clock_for
from services.db import Database
from services.errors import DataCorrupt
from services.records.restore_points import RestorePoint, snapshot_name
from services.storage.ceph import CephClusters
from services.storage.object_layout import chunk_key
from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.flows import backup
from tests.support.stack import Stack
from worker.managers.object_stores import manifest_of, open_store
from worker.managers.restore_point_steps import load_restore_point
from worker.runtime import Runtime
from worker.targets import data_path_of

pytestmark = pytest.mark.ceph

KINDS = ("local", "s3", "dir")
"""One target of each kind every stack configures: rbd, s3, directory."""
SIZE = 24 * MiB + 12_345
"""Seven 4 MiB objects, the last partial; `ceph.make_mixed_image` leaves object 4 a hole."""


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest, stack: Stack) -> str:
    name: str = request.param
    if targets.find(stack.settings, name) is None:
        pytest.fail(f"the stack has no target {name!r}: the object target needs the local "
                    "RGW (make up RGW=1); the directory target is in every stack")
    return name


@pytest.fixture
def rt(stack: Stack) -> Iterator[Runtime]:
    settings = stack.settings
    runtime = Runtime(settings, Database(settings.database_url), CephClusters(settings),
                      "test-reader", None, clock_for(None))  # type: ignore[arg-type]
    yield runtime
    runtime.clusters.close()
    runtime.db.dispose()


def _backed_up(stack: Stack, rt: Runtime, volumes_pool: rados.Ioctx, images: list[str],
               target: str, seed: int) -> tuple[RestorePoint, bytes]:
    """A new mixed volume backed up to `target`: its restore point, and the volume's
    bytes at the restore point's (source) snapshot."""
    source = ceph.unique_name(f"reader-{target}")
    images.append(source)
    ceph.make_mixed_image(volumes_pool, source, size=SIZE, seed=seed)
    rp = load_restore_point(rt, backup(stack, source, target=target)["restore_point_id"])
    with rbd.Image(volumes_pool, source, snapshot=snapshot_name(rp.id),
                   read_only=True) as snapshot:
        assert snapshot.size() == SIZE
        data = b"".join(snapshot.read(offset, min(4 * MiB, SIZE - offset))
                        for offset in range(0, SIZE, 4 * MiB))
    return rp, data


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_random_ranges_read_as_the_volume_did_at_its_snapshot(
        stack: Stack, rt: Runtime, target: str, volumes_pool: rados.Ioctx,
        images: list[str]) -> None:
    rp, data = _backed_up(stack, rt, volumes_pool, images, target, seed=3410)
    rng = random.Random(3411)
    with data_path_of(rt.settings, target).reader(rt, rp, cache_bytes=8 * MiB) as reader:
        assert reader.size == SIZE
        for _ in range(200):
            offset = rng.randrange(SIZE + MiB)
            length = rng.choice([1, 4096, rng.randrange(MiB), rng.randrange(9 * MiB)])
            assert _sha(reader.read(offset, length)) == _sha(data[offset:offset + length]), (
                target, offset, length)
        assert reader.read(SIZE - 10, 100) == data[-10:]  # clipped at the end
        assert reader.read(SIZE, 1) == b""
        assert _sha(reader.read(0, SIZE)) == _sha(data)

        # Sparse: every byte outside the extents is zero, and the hole is outside them.
        extents = reader.extents()
        held = bytearray(SIZE)
        for offset, length in extents:
            held[offset:offset + length] = data[offset:offset + length]
        assert bytes(held) == data
        hole = (16 * MiB, 20 * MiB)
        assert all(o + n <= hole[0] or o >= hole[1] for o, n in extents), extents
        assert sum(n for _o, n in extents) < SIZE


def _damage_rbd(rt: Runtime, rp: RestorePoint) -> str:
    """Flips a byte in the middle of the backup snapshot's first object (written without
    a snapshot context, so the snapshot reads it, as `rados put` would); what the error
    must name."""
    pool = targets.snapshotted(rt.settings, rp.target)
    with ceph.ioctx(pool.cluster, pool.pool) as io:
        with rbd.Image(io, rp.backup_image, read_only=True) as image:
            oid = f"{image.stat()['block_name_prefix']}.{0:016x}"
        blob = bytearray(io.read(oid, 4 * MiB))
        blob[len(blob) // 2] ^= 0x01
        io.write_full(oid, bytes(blob))
    return "object 0 (offset 0)"


def _damage_chunk(rt: Runtime, rp: RestorePoint) -> str:
    """Flips a byte in the middle of the restore point's first chunk as stored (sealed);
    what the error must name."""
    name = manifest_of(open_store(rt.settings, rt.db, rp.target), rp).chunks[0]
    backend = targets.chunked(rt.settings, rp.target).backend()
    try:
        key = chunk_key(rp.project_id, name)
        blob = backend.get(key, limit=8 * MiB)
        assert blob is not None
        flipped = bytearray(blob)
        flipped[len(flipped) // 2] ^= 0x01
        backend.put(key, bytes(flipped))
    finally:
        backend.close()
    return f"the chunk at offset 0 is corrupt: chunk {name}"


def test_a_flipped_byte_fails_the_reads_of_its_block_naming_it(
        stack: Stack, rt: Runtime, target: str, volumes_pool: rados.Ioctx,
        images: list[str]) -> None:
    rp, data = _backed_up(stack, rt, volumes_pool, images, target, seed=3412)
    keeps_chunks = isinstance(targets.get(rt.settings, target), targets.ChunkTarget)
    named = (_damage_chunk if keeps_chunks else _damage_rbd)(rt, rp)
    with data_path_of(rt.settings, target).reader(rt, rp) as reader:
        for offset, length in ((100, 1), (0, SIZE), (reader.block_size - 1, 2)):
            with pytest.raises(DataCorrupt) as raised:
                reader.read(offset, length)
            assert named in raised.value.message, (offset, length, raised.value.message)
        after = reader.block_size  # the next block holds data, and it is intact
        assert reader.read(after, 3 * MiB) == data[after:after + 3 * MiB]
