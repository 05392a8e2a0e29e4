"""Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over
`{webhook-id}.{webhook-timestamp}.{body}` with the secret's bytes, base64, prefixed `v1,`;
one signature per secret, space-separated, so receivers can rotate at their own pace. Any
Standard Webhooks library verifies them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

PREFIX = "whsec_"


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(PREFIX))


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(active: list[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": " ".join(sign(secret, msg_id, timestamp, body)
                                          for secret in active)}


def verify(secret: str, msg_id: str, timestamp: int, body: bytes, header: str) -> bool:
    """Whether one of the header's signatures is the secret's (what a receiver checks,
    with the timestamp's age)."""
    expected = sign(secret, msg_id, timestamp, body)
    return any(hmac.compare_digest(expected, given) for given in header.split())
