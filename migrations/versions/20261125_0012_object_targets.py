"""Object-storage targets: the leases that keep a garbage collection's sweep and the
backups to the same target apart (ADR 0007), the restore point a copy was made from, and
a plan's policy of off-site copies.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "target_lease_gates",
        sa.Column("target", sa.String(64), primary_key=True),
        sa.Column("generation", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "target_leases",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("exclusive", sa.Boolean(), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(op.f("ix_target_leases_target"), "target_leases", ["target"])
    op.add_column("restore_points", sa.Column("copied_from_restore_point_id", sa.String(36),
                                              nullable=True))
    op.create_index(op.f("ix_restore_points_copied_from_restore_point_id"), "restore_points",
                    ["copied_from_restore_point_id"])
    op.add_column("plans", sa.Column("copy_policy", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("plans", "copy_policy")
    op.drop_index(op.f("ix_restore_points_copied_from_restore_point_id"),
                  table_name="restore_points")
    op.drop_column("restore_points", "copied_from_restore_point_id")
    op.drop_index(op.f("ix_target_leases_target"), table_name="target_leases")
    op.drop_table("target_leases")
    op.drop_table("target_lease_gates")
