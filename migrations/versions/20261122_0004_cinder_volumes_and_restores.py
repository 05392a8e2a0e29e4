"""Cinder: the Cinder volume a protected volume is, and how a restore writes into Cinder
(a new volume Cairn creates, or an existing one in place).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("volumes") as batch:
        batch.add_column(sa.Column("cinder_volume_id", sa.String(36), nullable=True))
    op.create_index("ix_volumes_cinder_volume_id", "volumes", ["cinder_volume_id"])
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("restore_mode", sa.String(16), nullable=True))
        batch.add_column(sa.Column("restore_cinder_volume_id", sa.String(36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("restore_cinder_volume_id")
        batch.drop_column("restore_mode")
    op.drop_index("ix_volumes_cinder_volume_id", "volumes")
    with op.batch_alter_table("volumes") as batch:
        batch.drop_column("cinder_volume_id")
