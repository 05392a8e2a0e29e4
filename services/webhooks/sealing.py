"""Webhook signing secrets at rest: sealed with AES-256-GCM under the operator's key file
(`webhook_secret_key_file`, 64 hex digits, a mounted secret like the portal's session key),
each bound to its webhook's id, so a database dump or backup, a replica or a read-only
SQL account yields no secret that could forge Cairn's signatures to a tenant's receiver,
and a sealed value copied onto another webhook does not open.

The key is needed where secrets are made (cairn-api: create, rotate) and used (cairn-worker:
signing); cairn-scheduler never opens one. A process that has webhooks to serve and no key
refuses to start, saying so (`check_at_start`); so does one whose key does not open them."""

from __future__ import annotations

import base64
import binascii
import logging
import secrets
from functools import lru_cache
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from services.db import Database
from services.errors import ServiceUnavailable
from services.records.webhooks import Webhook
from services.settings import Settings, read_key_file

log = logging.getLogger(__name__)

PREFIX = "sealed:v1:"
SECRETS = "secrets"
"""What `Webhook.sealed_secrets` holds: the JSON list of the webhook's secrets."""
CREATED_ANSWER = "created-answer"
"""The secret in a creation's answer, kept for its Idempotency-Key's replays."""
SETTING = "CAIRN_WEBHOOK_SECRET_KEY_FILE"
MAKE_KEY = "od -An -vtx1 -N32 /dev/urandom | tr -d ' \\n' > webhook-secret.key"


class WebhookKeyUnavailable(ServiceUnavailable):
    code = "webhook_key_unavailable"


class SecretSeal:
    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    def seal(self, webhook_id: str, text: str, purpose: str = SECRETS) -> str:
        """`text` sealed for one webhook and one purpose: it opens for no other."""
        nonce = secrets.token_bytes(12)
        sealed = self._aead.encrypt(nonce, text.encode(), _aad(webhook_id, purpose))
        return PREFIX + base64.b64encode(nonce + sealed).decode()

    def open(self, webhook_id: str, sealed: str, purpose: str = SECRETS) -> str:
        try:
            if not sealed.startswith(PREFIX):
                raise ValueError("not sealed")
            raw = base64.b64decode(sealed.removeprefix(PREFIX), validate=True)
            return self._aead.decrypt(raw[:12], raw[12:], _aad(webhook_id, purpose)).decode()
        except (ValueError, binascii.Error, InvalidTag):
            raise WebhookKeyUnavailable(
                f"the signing secrets of webhook {webhook_id} do not open with the key in "
                f"{SETTING}: it is not the key they were sealed with") from None


def _aad(webhook_id: str, purpose: str) -> bytes:
    return f"cairn webhook v1 {purpose} {webhook_id}".encode()


def for_settings(settings: Settings) -> SecretSeal | None:
    """The seal under the configured key; None when no key file is configured."""
    path = settings.webhook_secret_key_file
    return None if path is None else _seal(path)


def required(settings: Settings) -> SecretSeal:
    found = for_settings(settings)
    if found is None:
        raise WebhookKeyUnavailable(
            f"webhooks are not available: the operator has not configured {SETTING}, the "
            "key their signing secrets are sealed with")
    return found


@lru_cache(maxsize=4)
def _seal(path: Path) -> SecretSeal:
    return SecretSeal(read_key_file(path, "the webhook secrets' key file"))


def check_at_start(db: Database, settings: Settings) -> None:
    """Refuse to start without the key when webhooks exist, or with a key that does not
    open them: every delivery would fail later, far from the cause."""
    try:
        with db.session() as session:
            count = session.scalar(select(func.count()).select_from(Webhook)) or 0
            sample = session.execute(select(Webhook.id, Webhook.sealed_secrets)
                                     .limit(1)).first()
    except SQLAlchemyError:
        # Not migrated yet, or away: starting is not this check's to refuse. Deliveries
        # then say what is missing in the log.
        log.warning("could not check the webhooks' key against the database",
                    exc_info=True)
        return
    if settings.webhook_secret_key_file is None:
        if count:
            raise WebhookKeyUnavailable(
                f"{count} webhooks keep their signing secrets sealed under the key named by "
                f"{SETTING}, which is not set: point it at the key file they were sealed "
                "with (a new key opens none of them). A new deployment makes one with "
                f"`{MAKE_KEY}`.")
        return
    seal = required(settings)
    if sample is not None:
        seal.open(sample[0], sample[1])
