"""Which key ring a process may seal and open webhook secrets with: the one that holds the
deployment's key, recorded in the database by id (`WebhookSealingKey`), and every key a
stored secret is sealed under.

The first process to use a key records it (or the migration that sealed the first
secrets does). From then on a process whose key file lacks that key, or a key some secret
is sealed under, is refused: at start (`check_at_start`, cairn-api and cairn-worker), and
before it seals or opens anything (`for_use`), so two processes with different key files
never both run, and a key file changed under a running process is checked again before it
is used. A process with no key file is refused once webhooks have been used: its
deliveries could not be signed and its webhooks not created.

`reseal` moves every secret to the current key and records it: the step of a rotation
after which the old key may go (docs/deploy.md)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import case, func, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from services.base import utcnow
from services.db import Database
from services.records.webhooks import CURRENT_KEY, Webhook, WebhookSealingKey
from services.settings import Settings
from services.webhooks import sealing
from services.webhooks.sealing import (
    KEY_ID_LENGTH,
    MAKE_KEY_FILE,
    PREFIX,
    SETTING,
    Keyring,
    WebhookKeyUnavailable,
)

log = logging.getLogger(__name__)

NOT_SEALED = "(not sealed)"


@dataclass(frozen=True)
class KeyUse:
    recorded: str | None
    """The deployment's key id, if a key was ever used."""
    sealed: dict[str, int] = field(default_factory=dict)
    """Webhooks by the id of the key their secrets are sealed under."""


def key_use(session: Session) -> KeyUse:
    recorded = session.get(WebhookSealingKey, CURRENT_KEY)
    kid = case((Webhook.sealed_secrets.startswith(PREFIX),
                func.substr(Webhook.sealed_secrets, len(PREFIX) + 1, KEY_ID_LENGTH)),
               else_=NOT_SEALED)
    sealed = {str(row[0]): int(row[1]) for row in session.execute(
        select(kid, func.count()).group_by(kid))}
    return KeyUse(recorded.key_id if recorded is not None else None, sealed)


def check(session: Session, keyring: Keyring | None) -> bool:
    """WebhookKeyUnavailable unless `keyring` may seal and open the deployment's webhook
    secrets; records its current key when none is recorded. True when it recorded it."""
    use = key_use(session)
    count = sum(use.sealed.values())
    if keyring is None:
        if use.recorded is None and not count:
            return False
        sealed = f"{_webhooks(count)} signing secrets sealed under key " \
            f"{_listed(use.sealed)}" if count else \
            f"webhook secrets were sealed here under key {use.recorded}"
        raise WebhookKeyUnavailable(
            f"{sealed}, and {SETTING} is not set: point it at the key file cairn-api and "
            "cairn-worker share (a new key opens none of the secrets). A new deployment "
            f"makes one with `{MAKE_KEY_FILE}`.")
    if use.recorded is not None and use.recorded not in keyring.ids:
        raise WebhookKeyUnavailable(
            f"the key file {SETTING} names holds key {_listed(keyring.ids)}, and the "
            f"deployment's webhook key is {use.recorded}: every cairn-api and cairn-worker "
            "needs the same key file (a new key opens none of the secrets). To rotate the "
            "key, add the new one as the file's last line everywhere first (docs/deploy.md).")
    missing = {kid: n for kid, n in use.sealed.items() if kid not in keyring.ids}
    if missing:
        raise WebhookKeyUnavailable(
            f"{_webhooks(sum(missing.values()))} signing secrets sealed under key "
            f"{_listed(missing)}, which the key file {SETTING} names does not hold (it holds "
            f"{_listed(keyring.ids)}): add that key to the file again, after the current "
            "one, then `cairn-manage webhooks reseal` seals them under the current key.")
    if use.recorded is None:
        session.add(WebhookSealingKey(name=CURRENT_KEY, key_id=keyring.current,
                                      recorded_at=utcnow()))
        session.flush()
        log.info("webhook secrets key %s recorded as the deployment's", keyring.current)
        return True
    return False


def _webhooks(count: int) -> str:
    return f"{count} webhooks have their" if count != 1 else "1 webhook has its"


def _listed(ids: Iterable[str]) -> str:
    return " and ".join(ids) or "(none)"


def check_at_start(db: Database, settings: Settings, *, wait: float) -> bool:
    """Refuse to start (WebhookKeyUnavailable) with a key file that is not the deployment's,
    or without one once webhooks were used: every delivery would fail later, far from the
    cause. A database that does not answer is asked again, with backoff, for `wait`
    seconds; then DatabaseNotReady, unless `wait` is 0: False, and the check is made before
    the first use instead (`for_use`)."""
    keyring = sealing.for_settings(settings)
    deadline = time.monotonic() + wait
    pause = 0.5
    while True:
        try:
            with db.session() as session:
                check(session, keyring)
            _remember(db.engine.url.render_as_string(), keyring)
            return True
        except IntegrityError:
            continue  # another process recorded its key meanwhile: compare with that one
        except SQLAlchemyError as exc:
            if wait <= 0:
                log.warning("could not check the webhook secrets' key against the database "
                            "(%s); it is checked before the first webhook secret is sealed "
                            "or opened", type(exc).__name__)
                return False
            if time.monotonic() + pause > deadline:
                raise DatabaseNotReady(
                    f"could not check the webhook secrets' key against the database within "
                    f"{wait:g} s ({type(exc).__name__}: is it up and migrated? `cairn-manage "
                    "db upgrade`)") from None
            log.warning("the database does not answer yet (%s); checking the webhook key "
                        "again in %.1f s", type(exc).__name__, pause)
            time.sleep(pause)
            pause = min(pause * 2, 8.0)


class DatabaseNotReady(Exception):
    pass


_lock = threading.Lock()
_checked: set[tuple[str, tuple[str, ...]]] = set()
"""(database, key ids) pairs checked in this process: a key file changed under a running
process has other ids, and is checked again before it is used."""


def _remember(database: str, keyring: Keyring | None) -> None:
    if keyring is not None:
        with _lock:
            _checked.add((database, keyring.ids))


def for_use(session: Session, settings: Settings) -> Keyring:
    """The key ring to seal and open with, checked against the database once per process
    and ring; WebhookKeyUnavailable (503) without one, or with one that is not the
    deployment's."""
    keyring = sealing.for_settings(settings)
    if keyring is None:
        raise sealing.not_configured()
    database = session.get_bind().engine.url.render_as_string()
    with _lock:
        known = (database, keyring.ids) in _checked
    if not known and not check(session, keyring):
        # Only what was there before this unit of work: a key it recorded itself is
        # checked again until that is committed.
        _remember(database, keyring)
    return keyring


@dataclass
class Resealed:
    resealed: int = 0
    already: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    """Webhook ids whose secrets open under no key of the ring, with why."""


def reseal(db: Database, keyring: Keyring, batch: int = 200) -> Resealed:
    """Seal every webhook's secrets under the ring's current key, and record it as the
    deployment's once all are (not when some open under no key of the ring). Safe beside
    running processes: each row is replaced only if it did not change meanwhile (a
    rotation), and read again otherwise."""
    done = Resealed()
    after = ""
    while True:
        with db.session() as session:
            rows = session.execute(
                select(Webhook.id, Webhook.sealed_secrets).where(Webhook.id > after)
                .order_by(Webhook.id).limit(batch)).all()
        if not rows:
            break
        after = rows[-1][0]
        for webhook_id, sealed in rows:
            _reseal_one(db, keyring, webhook_id, sealed, done)
    if not done.failed:
        with db.session() as session:
            recorded = session.get(WebhookSealingKey, CURRENT_KEY)
            if recorded is None:
                session.add(WebhookSealingKey(name=CURRENT_KEY, key_id=keyring.current,
                                              recorded_at=utcnow()))
            elif recorded.key_id != keyring.current:
                recorded.key_id, recorded.recorded_at = keyring.current, utcnow()
    return done


def _reseal_one(db: Database, keyring: Keyring, webhook_id: str, sealed: str,
                done: Resealed) -> None:
    while True:
        try:
            replaced = keyring.reseal(webhook_id, sealed)
        except WebhookKeyUnavailable as exc:
            done.failed[webhook_id] = exc.message
            return
        if replaced is None:
            done.already += 1
            return
        with db.session() as session:
            changed = session.execute(
                update(Webhook).where(Webhook.id == webhook_id,
                                      Webhook.sealed_secrets == sealed)
                .values(sealed_secrets=replaced))
            if getattr(changed, "rowcount", 0) == 1:
                done.resealed += 1
                return
            current = session.scalar(select(Webhook.sealed_secrets)
                                     .where(Webhook.id == webhook_id))
        if current is None:
            return  # deleted meanwhile
        sealed = current  # rotated meanwhile: reseal what it holds now
