"""A plan may follow a Cinder generic volume group: its volumes are the group's, kept in
step by the scheduler.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.add_column(sa.Column("cinder_group_id", sa.String(36), nullable=True))
        batch.create_index("ix_plans_cinder_group_id", ["cinder_group_id"])


def downgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.drop_index("ix_plans_cinder_group_id")
        batch.drop_column("cinder_group_id")
