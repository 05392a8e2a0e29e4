"""Idempotency keys on the POSTs that create work (the `Idempotency-Key` header as Stripe
and draft-ietf-httpapi-idempotency-key-header define it). Within KEEP of the first use, per
project:
- the same key with the same request answers the first answer again, and makes nothing;
- the same key with another request (body or path) is refused (422);
- two requests racing with one key: one makes the work, the other is refused (409) by the
  primary key, and its own work rolls back with it; when the first one's work, committed
  meanwhile, refuses the second's (a restore's image exists now), the second rolls back and
  answers the first answer (`api/idempotency.py`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from services.errors import Conflict, InvalidInput
from services.records.idempotency import IdempotentRequest

KEEP = timedelta(hours=24)


class IdempotencyKeyReused(InvalidInput):
    code = "idempotency_key_reused"


class IdempotencyKeyInFlight(Conflict):
    code = "idempotency_key_in_flight"


@dataclass(frozen=True)
class Replay:
    status_code: int
    body: Any


def fingerprint(method: str, path: str, body: bytes) -> str:
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":"))
    except ValueError:
        canonical = body.decode(errors="replace")
    return hashlib.sha256(f"{method} {path}\n{canonical}".encode()).hexdigest()


def previous(session: Session, project_id: str, key: str, print_: str,
             now: datetime) -> Replay | None:
    """The first answer to this key, or None when the key is new (or expired)."""
    row = session.get(IdempotentRequest, (project_id, key))
    if row is not None and row.created_at <= now - KEEP:
        session.delete(row)
        session.flush()
        row = None
    if row is None:
        return None
    if row.fingerprint != print_:
        raise IdempotencyKeyReused(
            f"Idempotency-Key {key!r} was used {row.created_at.isoformat()} for another "
            "request; use a new key for a new request", key=key)
    return Replay(row.status_code, json.loads(row.response))


def remember(session: Session, project_id: str, key: str, print_: str, status_code: int,
             body: Any, now: datetime) -> None:
    try:
        with session.begin_nested():
            session.add(IdempotentRequest(project_id=project_id, key=key, fingerprint=print_,
                                          status_code=status_code,
                                          response=json.dumps(body), created_at=now))
    except IntegrityError:
        raise IdempotencyKeyInFlight(
            f"another request with Idempotency-Key {key!r} is being answered; retry in a "
            "moment to get its answer", key=key) from None


def purge(session: Session, now: datetime) -> int:
    """Forget keys older than KEEP (cairn-scheduler calls it now and then)."""
    result: Any = session.execute(delete(IdempotentRequest)
                                  .where(IdempotentRequest.created_at <= now - KEEP))
    return int(result.rowcount or 0)
