"""Plans and their volumes, scheduled jobs (one per plan, volume and slot), concurrency
bookkeeping, quotas, volume locks, restore point plan and lock.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_QUEUED_PRUNE = sa.text("kind = 'prune' AND status = 'queued'")

_JOB_COLUMNS = [
    sa.Column("target", sa.String(64), nullable=True),
    sa.Column("backup_kind", sa.String(16), nullable=True),
    sa.Column("plan_id", sa.String(36), nullable=True),
    sa.Column("slot_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("not_before", sa.DateTime(timezone=True), nullable=True),
    sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("summary", sa.Text(), nullable=True),
]

_RESTORE_POINT_COLUMNS = [
    sa.Column("plan_id", sa.String(36), nullable=True),
    sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True),
]


def upgrade() -> None:
    op.create_table(
        "plans",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("window_start", sa.String(5), nullable=True),
        sa.Column("window_end", sa.String(5), nullable=True),
        sa.Column("retention", sa.JSON(), nullable=False),
        sa.Column("qos_bytes_per_second", sa.BigInteger(), nullable=True),
        sa.Column("qos_ops_per_second", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("next_slot_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_pruned_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_plans"),
        sa.UniqueConstraint("project_id", "name", name="uq_plans_project_id_name"),
    )
    op.create_index("ix_plans_project_id", "plans", ["project_id"])
    op.create_index("ix_plans_status_next_slot_at", "plans", ["status", "next_slot_at"])
    op.create_table(
        "plan_volumes",
        sa.Column("plan_id", sa.String(36), nullable=False),
        sa.Column("volume_id", sa.String(36), nullable=False),
        sa.ForeignKeyConstraint(["plan_id"], ["plans.id"], ondelete="CASCADE",
                                name="fk_plan_volumes_plan_id_plans"),
        sa.ForeignKeyConstraint(["volume_id"], ["volumes.id"],
                                name="fk_plan_volumes_volume_id_volumes"),
        sa.PrimaryKeyConstraint("plan_id", "volume_id", name="pk_plan_volumes"),
    )
    op.create_index("ix_plan_volumes_volume_id", "plan_volumes", ["volume_id"])
    op.create_table(
        "project_quotas",
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("restore_points", sa.BigInteger(), nullable=True),
        sa.Column("gigabytes", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("project_id", name="pk_project_quotas"),
    )
    op.create_table(
        "volume_locks",
        sa.Column("volume_id", sa.String(36), nullable=False),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["volume_id"], ["volumes.id"], ondelete="CASCADE",
                                name="fk_volume_locks_volume_id_volumes"),
        sa.PrimaryKeyConstraint("volume_id", name="pk_volume_locks"),
    )
    with op.batch_alter_table("jobs") as batch:
        for column in _JOB_COLUMNS:
            batch.add_column(column)
        batch.create_unique_constraint("uq_jobs_plan_id_volume_id_slot_at",
                                       ["plan_id", "volume_id", "slot_at"])
    op.drop_index("ix_jobs_status_queued_at", table_name="jobs")
    op.drop_index("ix_jobs_project_id_created_at", table_name="jobs")
    op.create_index("ix_jobs_status_sent_at_not_before", "jobs",
                    ["status", "sent_at", "not_before"])
    op.create_index("ix_jobs_project_id_created_at_id", "jobs", ["project_id", "created_at", "id"])
    op.create_index("ix_jobs_plan_id_created_at", "jobs", ["plan_id", "created_at"])
    op.create_index("ix_jobs_volume_id_created_at", "jobs", ["volume_id", "created_at"])
    op.create_index("uq_jobs_queued_prune_plan", "jobs", ["plan_id"], unique=True,
                    sqlite_where=_QUEUED_PRUNE, postgresql_where=_QUEUED_PRUNE)
    with op.batch_alter_table("restore_points") as batch:
        for column in _RESTORE_POINT_COLUMNS:
            batch.add_column(column)
    op.create_index("ix_restore_points_plan_id", "restore_points", ["plan_id"])


def downgrade() -> None:
    op.drop_index("ix_restore_points_plan_id", table_name="restore_points")
    with op.batch_alter_table("restore_points") as batch:
        for column in reversed(_RESTORE_POINT_COLUMNS):
            batch.drop_column(column.name)
    op.drop_index("uq_jobs_queued_prune_plan", table_name="jobs")
    op.drop_index("ix_jobs_volume_id_created_at", table_name="jobs")
    op.drop_index("ix_jobs_plan_id_created_at", table_name="jobs")
    op.drop_index("ix_jobs_project_id_created_at_id", table_name="jobs")
    op.drop_index("ix_jobs_status_sent_at_not_before", table_name="jobs")
    op.create_index("ix_jobs_project_id_created_at", "jobs", ["project_id", "created_at"])
    op.create_index("ix_jobs_status_queued_at", "jobs", ["status", "queued_at"])
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint("uq_jobs_plan_id_volume_id_slot_at", type_="unique")
        for column in reversed(_JOB_COLUMNS):
            batch.drop_column(column.name)
    op.drop_table("volume_locks")
    op.drop_table("project_quotas")
    op.drop_index("ix_plan_volumes_volume_id", table_name="plan_volumes")
    op.drop_table("plan_volumes")
    op.drop_index("ix_plans_status_next_slot_at", table_name="plans")
    op.drop_index("ix_plans_project_id", table_name="plans")
    op.drop_table("plans")
