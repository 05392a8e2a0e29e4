"""What sealing stores is byte for byte what it stored before the ciphertext was written
straight into the blob (and a blob of either opens with the other): restore points of
older workers restore, and theirs restore ours."""

from __future__ import annotations

import os

import pytest
import zstandard
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from services.storage.object_keys import TargetKeys
from worker.engine import chunks
from worker.engine.chunks import _HEADER, MAGIC, ChunkCodec

KEYS = TargetKeys.from_data_key("t", bytes(range(32)))
NONCE = bytes(range(12))


def _sealed_as_before(kind: bytes, name: str, plaintext: bytes) -> bytes:
    """The sealing of 2026-11-26, verbatim but for the fixed nonce."""
    compressed = zstandard.ZstdCompressor(level=1).compress(plaintext)
    flags, body = (1, compressed) if len(compressed) < len(plaintext) else (0, plaintext)
    aad = b"cairn " + kind + b"\0" + name.encode() + bytes([flags])
    return _HEADER.pack(MAGIC, flags, NONCE) + AESGCM(KEYS.encryption).encrypt(NONCE, body, aad)


@pytest.mark.parametrize("plaintext", [b"cairn " * 100_000, os.urandom(1 << 20)],
                         ids=["compressible", "incompressible"])
def test_a_chunk_is_sealed_as_before_and_opens_either_way(
        plaintext: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunks.os, "urandom", lambda n: NONCE[:n])
    codec = ChunkCodec(KEYS)
    sealed = codec.seal_chunk("p", plaintext)
    old = _sealed_as_before(b"chunk", sealed.name, plaintext)
    assert sealed.blob == old
    assert codec.open_chunk("p", sealed.name, old) == plaintext
    assert codec.open_chunk("p", sealed.name, bytearray(old)) == plaintext
    assert sealed.compress_cpu >= 0
    assert sealed.encrypt_cpu >= 0
    assert codec.seal(b"manifest", "manifests/p/rp", plaintext) == _sealed_as_before(
        b"manifest", "manifests/p/rp", plaintext)
