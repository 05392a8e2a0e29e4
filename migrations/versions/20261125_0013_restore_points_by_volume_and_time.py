"""A volume's restore points by time: the index on volume_id alone becomes one on
(volume_id, created_at, id), so a volume's newest restore point and its pages are an index
probe rather than a scan and sort of all its restore points.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_restore_points_volume_id_created_at_id", "restore_points",
                    ["volume_id", "created_at", "id"])
    op.drop_index("ix_restore_points_volume_id", table_name="restore_points")


def downgrade() -> None:
    op.create_index("ix_restore_points_volume_id", "restore_points", ["volume_id"])
    op.drop_index("ix_restore_points_volume_id_created_at_id", table_name="restore_points")
