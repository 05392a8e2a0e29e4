"""Webhook signing secrets at rest: sealed with AES-256-GCM under the operator's key ring
(`webhook_secret_key_file`, a mounted secret holding 64 hex digits a line, as the portal's
session key file), each bound to its webhook's id, so a database dump or backup, a replica
or a read-only SQL account yields no secret that could forge Cairn's signatures to a
tenant's receiver, and a sealed value copied onto another webhook does not open.

A sealed value names the key it was sealed under by its id (`key_id`: a MAC of a fixed
text under the key, so it tells nothing of the key), `sealed:v1:<key id>:<base64>`. The
ring's first key seals; every key in it opens what it sealed. Rotating is adding the new
key, moving it first, resealing (`cairn-manage webhooks reseal`) and removing the old one,
and no step leaves a secret that some process cannot open (docs/deploy.md).

Which key is the deployment's, and whether a process may use its ring, is `keys`'
business: this module only seals and opens."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from services.errors import CairnError, ServiceUnavailable
from services.settings import MAKE_KEY, Settings, read_keys

PREFIX = "sealed:v1:"
KEY_ID_LENGTH = 16
"""Hex digits of a key id: 64 bits tell a deployment's few keys apart."""
SETTING = "CAIRN_WEBHOOK_SECRET_KEY_FILE"
MAKE_KEY_FILE = f"{MAKE_KEY} > webhook-secret.key"
WHAT = "the webhook secrets' key file"


class WebhookKeyUnavailable(ServiceUnavailable):
    code = "webhook_key_unavailable"


def key_id(key: bytes) -> str:
    """The key's name in sealed values and in the database: a MAC under the key, so it
    names the key without telling anything of it."""
    return hmac.new(key, b"cairn webhook secrets key id", hashlib.sha256).hexdigest()[
        :KEY_ID_LENGTH]


def sealed_under(sealed: str) -> str | None:
    """The id of the key a sealed value was sealed under; None when it is not one."""
    if not sealed.startswith(PREFIX):
        return None
    found = sealed[len(PREFIX):len(PREFIX) + KEY_ID_LENGTH]
    return found if sealed[len(PREFIX) + KEY_ID_LENGTH:].startswith(":") else None


class Keyring:
    """The operator's keys, the current one first: it seals, and every one opens."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise ValueError("a key ring holds at least one key")
        self._aeads = {key_id(key): AESGCM(key) for key in keys}
        self.current = key_id(keys[0])

    @property
    def ids(self) -> tuple[str, ...]:
        """Every key's id, the current one first."""
        return tuple(self._aeads)

    def seal(self, webhook_id: str, text: str) -> str:
        """`text` sealed under the current key for one webhook: it opens for no other."""
        nonce = secrets.token_bytes(12)
        sealed = self._aeads[self.current].encrypt(nonce, text.encode(), _aad(webhook_id))
        return f"{PREFIX}{self.current}:{base64.b64encode(nonce + sealed).decode()}"

    def open(self, webhook_id: str, sealed: str) -> str:
        kid = sealed_under(sealed)
        if kid is None:
            raise WebhookKeyUnavailable(
                f"the signing secrets of webhook {webhook_id} are not sealed the way this "
                "Cairn seals them")
        aead = self._aeads.get(kid)
        if aead is None:
            raise WebhookKeyUnavailable(
                f"the signing secrets of webhook {webhook_id} are sealed under key {kid}, "
                f"which is not in the key file {SETTING} names (it holds {_listed(self.ids)})")
        try:
            raw = base64.b64decode(sealed[len(PREFIX) + KEY_ID_LENGTH + 1:], validate=True)
            return aead.decrypt(raw[:12], raw[12:], _aad(webhook_id)).decode()
        except (ValueError, binascii.Error, InvalidTag):
            raise WebhookKeyUnavailable(
                f"the signing secrets of webhook {webhook_id} do not open under key {kid}: "
                "they were changed, or belong to another webhook") from None

    def reseal(self, webhook_id: str, sealed: str) -> str | None:
        """The value sealed under the current key; None when it already is."""
        if sealed_under(sealed) == self.current:
            return None
        return self.seal(webhook_id, self.open(webhook_id, sealed))


def _aad(webhook_id: str) -> bytes:
    return f"cairn webhook v1 secrets {webhook_id}".encode()


def _listed(ids: Sequence[str]) -> str:
    return ", ".join(ids)


def for_settings(settings: Settings) -> Keyring | None:
    """The ring in the configured key file; None when none is configured."""
    path = settings.webhook_secret_key_file
    return None if path is None else _keyring(path)


def from_environment() -> Keyring | None:
    """The ring `CAIRN_WEBHOOK_SECRET_KEY_FILE` names, for `cairn-manage`, which runs with
    no more settings than the database's URL and this."""
    path = os.environ.get(SETTING)
    return _keyring(Path(path)) if path else None


def _keyring(path: Path) -> Keyring:
    try:
        return _cached_keyring(path, _stamp(path))
    except CairnError as exc:
        raise WebhookKeyUnavailable(exc.message) from None


def _stamp(path: Path) -> tuple[int, int]:
    """The file's identity as the cache keys it: a key file replaced in place (a rotated
    Kubernetes Secret) is read again."""
    try:
        found = path.stat()
    except OSError:
        return (0, 0)
    return (found.st_ino, found.st_mtime_ns)


@lru_cache(maxsize=8)
def _cached_keyring(path: Path, _stamp: tuple[int, int]) -> Keyring:
    return Keyring(read_keys(path, WHAT))


def not_configured() -> WebhookKeyUnavailable:
    return WebhookKeyUnavailable(
        f"webhooks are not available: the operator has not configured {SETTING}, the key "
        "their signing secrets are sealed with")
