"""Each webhook's slot for its one attempt in flight: the claim of an attempt takes it in a
guarded update, so racing workers and schedulers never send two at once to one receiver.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("attempt_key", sa.String(80), nullable=True))
        batch.add_column(sa.Column("attempt_until", sa.DateTime(timezone=True),
                                   nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.drop_column("attempt_until")
        batch.drop_column("attempt_key")
