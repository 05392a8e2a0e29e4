"""Whether a restore point's Cinder volume was bootable, so that a restore into a new
Cinder volume can make that volume bootable too.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("restore_points") as batch:
        batch.add_column(sa.Column("source_bootable", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("restore_points") as batch:
        batch.drop_column("source_bootable")
