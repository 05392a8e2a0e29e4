"""An object target's manifest as bytes: what comes back, and what is refused."""

from __future__ import annotations

import os

import pytest

from services.errors import DataCorrupt
from services.storage.object_keys import TargetKeys, new_data_key
from services.storage.object_layout import chunk_key, manifest_key, manifest_owner
from worker.engine.chunk_store import ObjectManifest, manifest_limit
from worker.engine.chunks import SEALING_OVERHEAD, ChunkCodec

NAME_A, NAME_B = "ab" * 32, "0f" * 32


def test_a_manifest_comes_back_as_it_was_written_in_index_order() -> None:
    manifest = ObjectManifest(4 << 20, 10 * (4 << 20) + 12345, {9: NAME_B, 0: NAME_A, 3: NAME_A})
    again = ObjectManifest.from_bytes(manifest.to_bytes(), "test")
    assert (again.chunk_size, again.image_size, again.chunks) == (
        manifest.chunk_size, manifest.image_size, manifest.chunks)
    assert list(again.chunks) == [0, 3, 9]
    assert again.names() == {NAME_A, NAME_B}


def test_an_empty_volume_has_an_empty_manifest() -> None:
    empty = ObjectManifest.from_bytes(ObjectManifest(1 << 20, 0).to_bytes(), "test")
    assert (empty.image_size, empty.chunks) == (0, {})


@pytest.mark.parametrize("damage", ["truncated", "longer", "magic", "short header"])
def test_a_damaged_manifest_is_corruption_not_a_shorter_restore(damage: str) -> None:
    data = ObjectManifest(4 << 20, 8 << 20, {0: NAME_A, 1: NAME_B}).to_bytes()
    damaged = {"truncated": data[:-1], "longer": data + b"\0" * 40,
               "magic": b"X" + data[1:], "short header": data[:10]}[damage]
    with pytest.raises(DataCorrupt, match="restore point rp-1"):
        ObjectManifest.from_bytes(damaged, "the manifest of restore point rp-1")


def test_object_names_lead_back_to_their_project_and_restore_point() -> None:
    assert chunk_key("p1", NAME_A) == f"chunks/p1/ab/{NAME_A}"
    assert manifest_key("p1", "rp-1") == "manifests/p1/rp-1"
    rp = "0b3e7a52-9f7c-4d2e-8a61-3c5d7e9f1a2b"
    assert manifest_owner(manifest_key("p1", rp)) == ("p1", rp)
    # Names Cairn does not give are nobody's it knows: never judged, never removed.
    for stranger in ("manifests/p1/rp-1", f"manifests/p1/{rp}.bak", f"manifests/{rp}",
                     f"chunks/p1/{rp}", f"manifests/p1/sub/{rp}", f"manifests/p1/{rp}\n",
                     f"manifests/p\n1/{rp}", f"manifests/p\x1b1/{rp}"):
        assert manifest_owner(stranger) is None, stranger


@pytest.mark.parametrize("chunk_size", [1 << 20, 2 << 20, 4 << 20])
@pytest.mark.parametrize("image_size", [0, 1, (1 << 20) - 1, 5 * (1 << 20) + 7, 3 << 30])
def test_the_fullest_manifest_of_an_image_fits_the_bound_on_its_reads(
        chunk_size: int, image_size: int) -> None:
    """Every chunk of the image holds data and none of it compresses: the most a manifest
    of that image can be, sealed, at any chunk size a target may have."""
    codec = ChunkCodec(TargetKeys.from_data_key("t", new_data_key()))
    count = -(-image_size // chunk_size)
    names = [os.urandom(32).hex() for _ in range(count)]
    fullest = ObjectManifest(chunk_size, image_size, dict(enumerate(names)))
    sealed = codec.seal(b"manifest", "manifests/p/rp", fullest.to_bytes())
    assert len(sealed) <= manifest_limit(image_size)
    # And the bound is no looser than the smallest chunk size makes it.
    assert manifest_limit(image_size) <= SEALING_OVERHEAD + 28 + 40 * -(-image_size // (1 << 20))


def test_a_sealed_chunk_is_never_more_than_its_plaintext_and_the_overhead() -> None:
    codec = ChunkCodec(TargetKeys.from_data_key("t", new_data_key()))
    for length in (1, 4096, (1 << 20) + 3, 4 << 20):
        assert len(codec.seal_chunk("p", os.urandom(length)).blob) == length + SEALING_OVERHEAD
