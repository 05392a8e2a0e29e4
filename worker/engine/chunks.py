"""Content-addressed chunks for object-storage targets: each chunk is named by a keyed hash
of its plaintext (BLAKE3 in keyed mode), compressed with zstd, then encrypted and
authenticated with AES-256-GCM.

Why BLAKE3: naming is the one step a repeated full of unchanged data pays for every chunk,
and keyed BLAKE3 costs 0.24 CPU-s per GiB here against 0.94 for HMAC-SHA256 (bench/README.md),
with the same 256-bit strength.

Sealed layout: magic `CAIRNCH1`, one flags byte (bit 0: zstd-compressed), a 12-byte random
nonce, then the ciphertext with its 16-byte tag. The associated data binds the ciphertext to
the chunk's name, so a chunk copied or renamed onto another name fails authentication rather
than being served as that name's data; opening also recomputes the name from the plaintext,
so a chunk that decrypts under the right key but holds other data is still refused.

All-zero chunks are never sealed: the caller skips them (`worker/engine/zeros.py`), and a
manifest records their absence as a hole."""

from __future__ import annotations

import hmac
import os
import struct
import time
from dataclasses import dataclass

import blake3
import zstandard
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from services.errors import DataCorrupt
from services.storage.object_keys import NONCE_BYTES, TargetKeys

MAGIC = b"CAIRNCH1"
_FLAG_ZSTD = 0x01
_HEADER = struct.Struct(f"<8sB{NONCE_BYTES}s")
_TAG_BYTES = 16
SEALING_OVERHEAD = _HEADER.size + _TAG_BYTES
"""What sealing adds to a plaintext at most (compression never grows it: see `seal`)."""
ZSTD_LEVEL = 1
"""As Proxmox Backup Server's chunks: 0.44 CPU-s per GiB here against 0.75 for zstd's
default 3, for the same ratio on the benchmark's data (bench/README.md). A full to object
storage is CPU-bound before it is network-bound on small machines."""


def chunk_name(keys: TargetKeys, project_id: str, plaintext: bytes) -> str:
    """The chunk's name: keyed BLAKE3 (256 bits) of its plaintext under the project's naming
    key, hex."""
    return blake3.blake3(plaintext, key=keys.naming_key(project_id),
                         max_threads=1).hexdigest()


def _aad(kind: bytes, name: str) -> bytes:
    return b"cairn " + kind + b"\0" + name.encode()


@dataclass(frozen=True)
class Sealed:
    name: str
    blob: bytearray
    plaintext_bytes: int
    compress_cpu: float = 0.0
    """Thread CPU seconds spent compressing it (and encrypting it, below)."""
    encrypt_cpu: float = 0.0


class ChunkCodec:
    """Seals and opens one target's chunks (and, with another `kind`, its manifests).
    Not shared between threads: zstd's contexts are not thread-safe."""

    def __init__(self, keys: TargetKeys) -> None:
        self.keys = keys
        self._aead = AESGCM(keys.encryption)
        self._compress = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        self._decompress = zstandard.ZstdDecompressor()

    def name(self, project_id: str, plaintext: bytes) -> str:
        return chunk_name(self.keys, project_id, plaintext)

    def seal_chunk(self, project_id: str, plaintext: bytes, name: str | None = None) -> Sealed:
        """`name`: the chunk's name when the caller computed it already (to ask the store
        whether it has the chunk before paying for compression and encryption)."""
        name = name or chunk_name(self.keys, project_id, plaintext)
        return Sealed(name, *self._sealed(b"chunk", name, plaintext))

    def open_chunk(self, project_id: str, name: str, blob: bytes | bytearray) -> bytes:
        """The chunk's plaintext; DataCorrupt when the blob was altered, belongs to another
        name or project, or was written under another key."""
        plaintext = self.open(b"chunk", name, blob)
        if not hmac.compare_digest(chunk_name(self.keys, project_id, plaintext), name):
            raise DataCorrupt(f"chunk {name} holds data that does not hash to its name")
        return plaintext

    def seal(self, kind: bytes, name: str, plaintext: bytes) -> bytearray:
        return self._sealed(kind, name, plaintext)[0]

    def _sealed(self, kind: bytes, name: str,
                plaintext: bytes) -> tuple[bytearray, int, float, float]:
        """The sealed blob, the plaintext's length, and the thread CPU seconds compressing
        and encrypting took. Each library makes one pass over what it is given and writes
        its output once: the ciphertext goes straight into the blob behind its header."""
        started = time.thread_time()
        compressed = self._compress.compress(plaintext)
        compressed_at = time.thread_time()
        flags, body = (_FLAG_ZSTD, compressed) if len(compressed) < len(plaintext) else (
            0, plaintext)  # incompressible data is stored as it is, never grown
        nonce = os.urandom(NONCE_BYTES)
        blob = bytearray(_HEADER.size + len(body) + _TAG_BYTES)
        _HEADER.pack_into(blob, 0, MAGIC, flags, nonce)
        with memoryview(blob) as view:
            self._aead.encrypt_into(nonce, body, _aad(kind, name) + bytes([flags]),
                                    view[_HEADER.size:])
        return (blob, len(plaintext), compressed_at - started,
                time.thread_time() - compressed_at)

    def open(self, kind: bytes, name: str, blob: bytes | bytearray) -> bytes:
        if len(blob) < _HEADER.size or not blob.startswith(MAGIC):
            raise DataCorrupt(f"{kind.decode()} {name} is not a Cairn sealed object")
        _, flags, nonce = _HEADER.unpack_from(blob)
        try:
            with memoryview(blob) as view:  # a slice of bytes would copy the chunk
                body = self._aead.decrypt(nonce, view[_HEADER.size:],
                                          _aad(kind, name) + bytes([flags]))
        except InvalidTag:
            raise DataCorrupt(
                f"{kind.decode()} {name} fails its authentication tag: it was altered, "
                "belongs to another name, or was written under another key") from None
        if flags & _FLAG_ZSTD:
            try:
                return self._decompress.decompress(body)
            except zstandard.ZstdError as exc:  # authentic but undecodable: a Cairn bug
                raise DataCorrupt(f"{kind.decode()} {name} does not decompress: {exc}") from exc
        return body
