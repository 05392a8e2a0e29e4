"""A webhook's signing secrets: the current one and, for a while after a rotation, the
previous one. Deliveries are signed with every secret not expired, so a receiver switches
to the new secret at its own pace within that while."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from services.webhooks.signing import new_secret


def first() -> tuple[str, str]:
    """(the column's JSON, the secret) for a new webhook."""
    secret = new_secret()
    return json.dumps([{"secret": secret, "expires_at": None}]), secret


def _live(stored: str, now: datetime) -> list[dict[str, str | None]]:
    items: list[dict[str, str | None]] = json.loads(stored)
    return [item for item in items
            if item["expires_at"] is None or datetime.fromisoformat(str(item["expires_at"])) > now]


def current_secret(stored: str) -> str:
    """The newest secret: the one a rotation (or the creation) answered."""
    items: list[dict[str, str | None]] = json.loads(stored)
    return str(items[0]["secret"])


def active_secrets(stored: str, now: datetime) -> list[str]:
    return [str(item["secret"]) for item in _live(stored, now)]


def rotate(stored: str, now: datetime, keep_old_for: timedelta) -> tuple[str, str]:
    """(the column's new JSON, the new secret): the current secret expires after
    `keep_old_for`; older ones that expired are dropped."""
    secret = new_secret()
    kept = [{"secret": item["secret"],
             "expires_at": item["expires_at"] or (now + keep_old_for).isoformat()}
            for item in _live(stored, now)]
    return json.dumps([{"secret": secret, "expires_at": None}, *kept]), secret
