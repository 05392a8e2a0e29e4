"""Warnings on jobs (steps after a restore point became available that failed and were
left), plans' verify policy, and how each restore point was last verified.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("warnings", sa.Text(), nullable=True))
        batch.add_column(sa.Column("verify_fraction", sa.Float(), nullable=True))
    with op.batch_alter_table("plans") as batch:
        batch.add_column(sa.Column("verify_policy", sa.JSON(), nullable=True))
    with op.batch_alter_table("restore_points") as batch:
        batch.add_column(sa.Column("verify_mode", sa.String(16), nullable=True))
        batch.add_column(sa.Column("verified_full_at", sa.DateTime(timezone=True),
                                   nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("restore_points") as batch:
        batch.drop_column("verified_full_at")
        batch.drop_column("verify_mode")
    with op.batch_alter_table("plans") as batch:
        batch.drop_column("verify_policy")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("verify_fraction")
        batch.drop_column("warnings")
