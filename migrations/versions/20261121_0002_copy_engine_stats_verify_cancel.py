"""Copy engine: IOPS limit, cancel, load stats, resume; incremental base and verify results.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_JOB_COLUMNS = [
    sa.Column("qos_ops_per_second", sa.Integer(), nullable=True),
    sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("engine_seconds", sa.Float(), nullable=False, server_default="0"),
    sa.Column("copy_seconds", sa.Float(), nullable=False, server_default="0"),
    sa.Column("copy_window", sa.Integer(), nullable=True),
    sa.Column("bytes_read", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("bytes_written", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("bytes_resumed", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("throughput_bytes_per_second", sa.Float(), nullable=True),
]

_RESTORE_POINT_COLUMNS = [
    sa.Column("base_restore_point_id", sa.String(36), nullable=True),
    sa.Column("full_reason", sa.Text(), nullable=True),
    sa.Column("bytes_read", sa.BigInteger(), nullable=True),
    sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("verify_status", sa.String(16), nullable=True),
    sa.Column("corrupt_object_count", sa.BigInteger(), nullable=True),
    sa.Column("corrupt_objects", sa.Text(), nullable=True),
]


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for column in _JOB_COLUMNS:
            batch.add_column(column)
    with op.batch_alter_table("restore_points") as batch:
        for column in _RESTORE_POINT_COLUMNS:
            batch.add_column(column)


def downgrade() -> None:
    with op.batch_alter_table("restore_points") as batch:
        for column in reversed(_RESTORE_POINT_COLUMNS):
            batch.drop_column(column.name)
    with op.batch_alter_table("jobs") as batch:
        for column in reversed(_JOB_COLUMNS):
            batch.drop_column(column.name)
