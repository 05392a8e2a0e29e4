"""Sealing and opening chunks: what a tampered, renamed, foreign or mis-keyed chunk does."""

from __future__ import annotations

import os

import pytest

from services.errors import DataCorrupt, TargetKeyUnavailable
from services.storage.object_keys import (
    TargetKeys,
    new_data_key,
    unwrap_data_key,
    wrap_data_key,
)
from worker.engine.chunks import ChunkCodec, chunk_name

MiB = 1 << 20


@pytest.fixture
def keys() -> TargetKeys:
    return TargetKeys.from_data_key("offsite-s3", new_data_key())


def test_a_chunk_comes_back_as_it_went_in(keys: TargetKeys) -> None:
    codec = ChunkCodec(keys)
    for data in (b"a" * (4 * MiB), os.urandom(4 * MiB), os.urandom(1234567), b"x"):
        sealed = codec.seal_chunk("project-a", data)
        assert codec.open_chunk("project-a", sealed.name, sealed.blob) == data


def test_compressible_data_is_stored_smaller_and_random_data_never_grows_much(
        keys: TargetKeys) -> None:
    codec = ChunkCodec(keys)
    assert len(codec.seal_chunk("p", b"cairn " * 700000).blob) < 64 * 1024
    random = os.urandom(4 * MiB)
    assert len(codec.seal_chunk("p", random).blob) <= len(random) + 64


def test_names_are_per_project_and_per_target(keys: TargetKeys) -> None:
    data = os.urandom(4096)
    assert chunk_name(keys, "project-a", data) == chunk_name(keys, "project-a", data)
    assert chunk_name(keys, "project-a", data) != chunk_name(keys, "project-b", data)
    other_target = TargetKeys.from_data_key("other", new_data_key())
    assert chunk_name(keys, "project-a", data) != chunk_name(other_target, "project-a", data)


def test_sealing_the_same_data_twice_gives_different_ciphertexts(keys: TargetKeys) -> None:
    codec = ChunkCodec(keys)
    first, second = codec.seal_chunk("p", b"same"), codec.seal_chunk("p", b"same")
    assert first.name == second.name
    assert first.blob != second.blob


def test_a_flipped_byte_anywhere_is_refused(keys: TargetKeys) -> None:
    codec = ChunkCodec(keys)
    sealed = codec.seal_chunk("p", os.urandom(64 * 1024))
    for position in (0, 8, 9, 20, len(sealed.blob) // 2, len(sealed.blob) - 1):
        tampered = bytearray(sealed.blob)
        tampered[position] ^= 0x01
        with pytest.raises(DataCorrupt):
            codec.open_chunk("p", sealed.name, bytes(tampered))


def test_a_truncated_or_empty_blob_is_refused(keys: TargetKeys) -> None:
    codec = ChunkCodec(keys)
    sealed = codec.seal_chunk("p", os.urandom(4096))
    for blob in (b"", sealed.blob[:10], sealed.blob[:-1]):
        with pytest.raises(DataCorrupt):
            codec.open_chunk("p", sealed.name, blob)


def test_a_chunk_stored_under_another_name_is_refused(keys: TargetKeys) -> None:
    codec = ChunkCodec(keys)
    one, two = codec.seal_chunk("p", b"one" * 1000), codec.seal_chunk("p", b"two" * 1000)
    with pytest.raises(DataCorrupt, match="authentication"):
        codec.open_chunk("p", one.name, two.blob)


def test_another_projects_chunk_is_refused_even_under_the_same_target(
        keys: TargetKeys) -> None:
    codec = ChunkCodec(keys)
    sealed = codec.seal_chunk("project-a", b"secret" * 100)
    with pytest.raises(DataCorrupt, match="does not hash to its name"):
        codec.open_chunk("project-b", sealed.name, sealed.blob)


def test_another_targets_key_reads_nothing(keys: TargetKeys) -> None:
    sealed = ChunkCodec(keys).seal_chunk("p", b"data" * 100)
    stranger = ChunkCodec(TargetKeys.from_data_key("offsite-s3", new_data_key()))
    with pytest.raises(DataCorrupt):
        stranger.open_chunk("p", sealed.name, sealed.blob)


def test_the_data_key_opens_only_with_the_operator_key_it_was_wrapped_with() -> None:
    operator, data_key = os.urandom(32), new_data_key()
    wrapped = wrap_data_key(operator, "offsite-s3", data_key)
    assert unwrap_data_key(operator, "offsite-s3", wrapped) == data_key
    with pytest.raises(TargetKeyUnavailable, match="not the key the target was made with"):
        unwrap_data_key(os.urandom(32), "offsite-s3", wrapped)
    with pytest.raises(TargetKeyUnavailable):  # bound to its target's name
        unwrap_data_key(operator, "another-target", wrapped)
    with pytest.raises(TargetKeyUnavailable, match="not a Cairn data key"):
        unwrap_data_key(operator, "offsite-s3", b"garbage")
