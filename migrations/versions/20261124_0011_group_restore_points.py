"""Crash-consistent group backups: a plan's `consistency` (volume or group), the group
restore points (one RBD group snapshot per run of a group plan), and the group a backup
job and its restore point belong to.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "restore_point_groups",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("plan_id", sa.String(36), nullable=False),
        sa.Column("slot_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claimed_by", sa.String(36), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("rbd_group", sa.String(512), nullable=True),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(op.f("ix_restore_point_groups_project_id"), "restore_point_groups",
                    ["project_id"])
    op.create_index(op.f("ix_restore_point_groups_plan_id"), "restore_point_groups",
                    ["plan_id"])
    op.add_column("plans", sa.Column("consistency", sa.String(16), nullable=False,
                                     server_default="volume"))
    op.add_column("jobs", sa.Column("group_id", sa.String(36), nullable=True))
    op.create_index(op.f("ix_jobs_group_id"), "jobs", ["group_id"])
    op.add_column("restore_points", sa.Column("group_id", sa.String(36), nullable=True))
    op.create_index(op.f("ix_restore_points_group_id"), "restore_points", ["group_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_restore_points_group_id"), "restore_points")
    op.drop_column("restore_points", "group_id")
    op.drop_index(op.f("ix_jobs_group_id"), "jobs")
    op.drop_column("jobs", "group_id")
    op.drop_column("plans", "consistency")
    op.drop_index(op.f("ix_restore_point_groups_plan_id"), "restore_point_groups")
    op.drop_index(op.f("ix_restore_point_groups_project_id"), "restore_point_groups")
    op.drop_table("restore_point_groups")
