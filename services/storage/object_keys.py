"""The keys of an object-storage (S3) target: a random data key per target, kept in the
bucket only wrapped by the operator's key, and the keys derived from it.

Why a data key per target, wrapped: rotating or revoking the operator's key rewraps one small
object instead of re-encrypting every chunk, and a bucket holds everything needed to read it
back except the operator's key ("no key, no read").

Derived from the data key with HKDF-SHA256:
- one AES-256-GCM key for every chunk and manifest of the target;
- one naming key per project: a chunk's name is keyed BLAKE3(project's naming key, plaintext).
  Identical data of two projects therefore gets two unrelated names and is stored twice:
  dedup never crosses a project boundary, so nobody can learn whether another project holds
  a given block by uploading it and watching whether the store already has it."""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from services.errors import TargetKeyUnavailable

KEY_BYTES = 32
NONCE_BYTES = 12
FINGERPRINT_BYTES = 16
_WRAPPED_MAGIC = b"CAIRNDK1"


def _derive(data_key: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(
        data_key)


def _target_aad(target: str) -> bytes:
    return b"cairn data key\0" + target.encode()


def new_data_key() -> bytes:
    return os.urandom(KEY_BYTES)


def fingerprint(data_key: bytes) -> str:
    """What names a data key in Cairn's database and on each restore point sealed with it:
    derived one way (HKDF), so it reveals nothing of the key, and the same however the key
    is wrapped (a rotation of the operator's key rewraps it, the fingerprint stays)."""
    return _derive(data_key, b"cairn data key fingerprint v1")[:FINGERPRINT_BYTES].hex()


def wrap_data_key(operator_key: bytes, target: str, data_key: bytes) -> bytes:
    """The data key sealed under the operator's key, bound to the target's name: a wrapped
    key copied to another target's bucket does not open there."""
    nonce = os.urandom(NONCE_BYTES)
    return _WRAPPED_MAGIC + nonce + AESGCM(operator_key).encrypt(
        nonce, data_key, _target_aad(target))


def unwrap_data_key(operator_key: bytes, target: str, wrapped: bytes) -> bytes:
    if not wrapped.startswith(_WRAPPED_MAGIC) or len(wrapped) < len(_WRAPPED_MAGIC) + NONCE_BYTES:
        raise TargetKeyUnavailable(
            f"the data key object of target {target!r} is not a Cairn data key")
    nonce = wrapped[len(_WRAPPED_MAGIC):len(_WRAPPED_MAGIC) + NONCE_BYTES]
    try:
        return AESGCM(operator_key).decrypt(
            nonce, wrapped[len(_WRAPPED_MAGIC) + NONCE_BYTES:], _target_aad(target))
    except InvalidTag:
        raise TargetKeyUnavailable(
            f"the configured key cannot open target {target!r}'s data key: it is not the key "
            "the target was made with (or the key object was altered); nothing on this "
            "target can be read without that key") from None


@dataclass(frozen=True)
class TargetKeys:
    """What a worker needs to write and read one target: made from the unwrapped data key."""

    target: str
    encryption: bytes
    _naming_root: bytes

    @classmethod
    def from_data_key(cls, target: str, data_key: bytes) -> TargetKeys:
        return cls(target, _derive(data_key, b"cairn chunk encryption v1"),
                   _derive(data_key, b"cairn chunk naming v1"))

    def naming_key(self, project_id: str) -> bytes:
        return hmac.new(self._naming_root, b"project\0" + project_id.encode(),
                        hashlib.sha256).digest()
