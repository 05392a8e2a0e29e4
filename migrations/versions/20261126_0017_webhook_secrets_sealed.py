"""Webhooks' signing secrets sealed under the operator's key (CAIRN_WEBHOOK_SECRET_KEY_FILE)
instead of stored as they are.

Existing secrets are sealed on the way up and opened on the way down, so both directions
need the key when webhooks exist; without it the migration stops and says so, before it
changes anything.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
from alembic import context, op

from services.settings import read_key_file
from services.webhooks.sealing import MAKE_KEY, SETTING, SecretSeal

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

webhooks = sa.table("webhooks", sa.column("id", sa.String), sa.column("secrets", sa.Text),
                    sa.column("sealed_secrets", sa.Text))


def _seal(rows: int) -> SecretSeal:
    """The key the secrets are (to be) sealed under: the one the tests hand over, else the
    key file the settings name."""
    given = context.config.attributes.get("webhook_secret_key")
    if given is not None:
        return SecretSeal(given)
    # The variable itself, not the whole settings: a migration needs no more of them.
    path = os.environ.get(SETTING)
    if not path:
        raise RuntimeError(
            f"{rows} webhooks have signing secrets to seal or open, and {SETTING} is not "
            f"set: point it at the key file cairn-api and cairn-worker will use (make one "
            f"with `{MAKE_KEY}`), then run the migration again")
    return SecretSeal(read_key_file(Path(path), "the webhook secrets' key file"))


def upgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.select(webhooks.c.id, webhooks.c.secrets)).all()
    seal = _seal(len(rows)) if rows else None
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("sealed_secrets", sa.Text(), nullable=True))
    for webhook_id, plain in rows:
        assert seal is not None
        connection.execute(sa.update(webhooks).where(webhooks.c.id == webhook_id)
                           .values(sealed_secrets=seal.seal(webhook_id, plain)))
    with op.batch_alter_table("webhooks") as batch:
        batch.alter_column("sealed_secrets", existing_type=sa.Text(), nullable=False)
        batch.drop_column("secrets")


def downgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.select(webhooks.c.id, webhooks.c.sealed_secrets)).all()
    seal = _seal(len(rows)) if rows else None
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("secrets", sa.Text(), nullable=True))
    for webhook_id, sealed in rows:
        assert seal is not None
        connection.execute(sa.update(webhooks).where(webhooks.c.id == webhook_id)
                           .values(secrets=seal.open(webhook_id, sealed)))
    with op.batch_alter_table("webhooks") as batch:
        batch.alter_column("secrets", existing_type=sa.Text(), nullable=False)
        batch.drop_column("sealed_secrets")
