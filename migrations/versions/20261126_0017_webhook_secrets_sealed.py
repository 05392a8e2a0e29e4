"""Webhooks' signing secrets sealed under the operator's key ring
(CAIRN_WEBHOOK_SECRET_KEY_FILE) instead of stored as they are, and the table that records
which key is the deployment's.

Existing secrets are sealed on the way up (under the ring's first key, which is recorded)
and opened on the way down, so both directions need the key file when webhooks exist;
without it the migration stops and says so, before it changes anything.

On the way up no row version the migration leaves holds a secret: each row's plaintext is
replaced in the same UPDATE that writes its sealed value, so the dropped column carries
nothing. What the database keeps of the old versions is another matter: PostgreSQL keeps
them as dead tuples until `VACUUM FULL webhooks` rewrites the table (docs/operations.md
says to run it), and its WAL and any backup taken before the upgrade still hold the
secrets, so they are rotated. SQLite overwrites what it frees (secure_delete, set here
whatever the library's default).

The sealing code is frozen here as this revision wrote it, not imported: the application's
may change, and this migration must keep producing what 0017's readers read.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from alembic import context, op
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

SETTING = "CAIRN_WEBHOOK_SECRET_KEY_FILE"
MAKE_KEY = "od -An -vtx1 -N32 /dev/urandom | tr -d ' \\n' > webhook-secret.key"
PREFIX = "sealed:v1:"

webhooks = sa.table("webhooks", sa.column("id", sa.String), sa.column("secrets", sa.Text),
                    sa.column("sealed_secrets", sa.Text))
sealing_key = sa.table("webhook_sealing_key", sa.column("name", sa.String),
                       sa.column("key_id", sa.String),
                       sa.column("recorded_at", sa.DateTime(timezone=True)))


class _Ring:
    """Sealing as revision 0017 defines it: AES-256-GCM under the ring's first key, bound
    to the webhook's id, `sealed:v1:<key id>:<base64 of nonce and sealed bytes>`."""

    def __init__(self, keys: list[bytes]) -> None:
        self.keys = {self.key_id(key): key for key in keys}
        self.current = self.key_id(keys[0])

    @staticmethod
    def key_id(key: bytes) -> str:
        return hmac.new(key, b"cairn webhook secrets key id", hashlib.sha256).hexdigest()[:16]

    @staticmethod
    def _aad(webhook_id: str) -> bytes:
        return f"cairn webhook v1 secrets {webhook_id}".encode()

    def seal(self, webhook_id: str, text: str) -> str:
        nonce = secrets.token_bytes(12)
        sealed = AESGCM(self.keys[self.current]).encrypt(nonce, text.encode(),
                                                         self._aad(webhook_id))
        return f"{PREFIX}{self.current}:{base64.b64encode(nonce + sealed).decode()}"

    def open(self, webhook_id: str, sealed: str) -> str:
        kid, _, body = sealed.removeprefix(PREFIX).partition(":")
        if sealed.startswith(PREFIX) and not body:
            return self._open_without_key_id(webhook_id, kid)
        if not sealed.startswith(PREFIX) or kid not in self.keys:
            raise RuntimeError(f"the secrets of webhook {webhook_id} are sealed under key "
                               f"{kid}, which is not in the key file {SETTING} names")
        raw = base64.b64decode(body)
        return AESGCM(self.keys[kid]).decrypt(raw[:12], raw[12:],
                                              self._aad(webhook_id)).decode()

    def _open_without_key_id(self, webhook_id: str, body: str) -> str:
        """`sealed:v1:<base64>`, as this revision wrote it before its values named their key
        (never released; only development databases hold it): tried under every key, so a
        downgrade takes such a database back to 0016 and the upgrade seals it again."""
        raw = base64.b64decode(body)
        for key in self.keys.values():
            try:
                return AESGCM(key).decrypt(raw[:12], raw[12:], self._aad(webhook_id)).decode()
            except InvalidTag:
                continue
        raise RuntimeError(f"the secrets of webhook {webhook_id} open under no key in the key "
                           f"file {SETTING} names")


def _read_keys(path: Path) -> list[bytes]:
    keys = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            key = bytes.fromhex(line)
        except ValueError:
            key = b""
        if len(key) != 32:
            raise RuntimeError(f"{SETTING} {path}: line {number} must hold 64 hex digits "
                               "(32 random bytes), the current key first")
        keys.append(key)
    if not keys:
        raise RuntimeError(f"{SETTING} {path} holds no key")
    return keys


def _ring(rows: int) -> _Ring:
    """The key ring the secrets are (to be) sealed under: the one the tests hand over, else
    the key file the variable names."""
    given = context.config.attributes.get("webhook_secret_key")
    if given is not None:
        return _Ring(list(given) if isinstance(given, list | tuple) else [given])
    # The variable itself, not the whole settings: a migration needs no more of them.
    path = os.environ.get(SETTING)
    if not path:
        raise RuntimeError(
            f"{rows} webhooks have signing secrets to seal or open, and {SETTING} is not "
            f"set: point it at the key file cairn-api and cairn-worker will use (make one "
            f"with `{MAKE_KEY}`), then run the migration again")
    return _Ring(_read_keys(Path(path)))


def upgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.select(webhooks.c.id, webhooks.c.secrets)).all()
    ring = _ring(len(rows)) if rows else None
    if connection.dialect.name == "sqlite":
        # Pages the table rebuild below frees are overwritten, whatever the build's default.
        connection.exec_driver_sql("PRAGMA secure_delete = ON")
    op.create_table(
        "webhook_sealing_key",
        sa.Column("name", sa.String(16), primary_key=True),
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False))
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("sealed_secrets", sa.Text(), nullable=True))
    for webhook_id, plain in rows:
        assert ring is not None
        # The plaintext goes in the same UPDATE: the row version it writes holds none.
        connection.execute(sa.update(webhooks).where(webhooks.c.id == webhook_id)
                           .values(sealed_secrets=ring.seal(webhook_id, plain), secrets=""))
    if ring is not None:
        connection.execute(sa.insert(sealing_key).values(
            name="current", key_id=ring.current, recorded_at=datetime.now(UTC)))
    with op.batch_alter_table("webhooks") as batch:
        batch.alter_column("sealed_secrets", existing_type=sa.Text(), nullable=False)
        batch.drop_column("secrets")


def downgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.select(webhooks.c.id, webhooks.c.sealed_secrets)).all()
    ring = _ring(len(rows)) if rows else None
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("secrets", sa.Text(), nullable=True))
    for webhook_id, sealed in rows:
        assert ring is not None
        connection.execute(sa.update(webhooks).where(webhooks.c.id == webhook_id)
                           .values(secrets=ring.open(webhook_id, sealed)))
    with op.batch_alter_table("webhooks") as batch:
        batch.alter_column("secrets", existing_type=sa.Text(), nullable=False)
        batch.drop_column("sealed_secrets")
    if sa.inspect(connection).has_table("webhook_sealing_key"):  # not before key ids
        op.drop_table("webhook_sealing_key")
