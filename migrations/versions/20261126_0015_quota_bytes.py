"""The storage quota counts bytes: each restore point's `quota_bytes` (what it holds on its
target for its project's quota, moved on when it is deleted and a later one keeps its data),
and a project's limit in bytes (`max_bytes`, the API's `gigabytes` x 2^30), so a limit below
a GiB can be set.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

GIB = 1 << 30


def upgrade() -> None:
    with op.batch_alter_table("restore_points") as batch:
        batch.add_column(sa.Column("quota_bytes", sa.BigInteger(), nullable=True))
    # What the quota counted until now: the bytes each restore point copied.
    op.execute("UPDATE restore_points SET quota_bytes = bytes_copied")
    with op.batch_alter_table("project_quotas") as batch:
        batch.add_column(sa.Column("max_bytes", sa.BigInteger(), nullable=True))
    op.execute(f"UPDATE project_quotas SET max_bytes = gigabytes * {GIB}")
    with op.batch_alter_table("project_quotas") as batch:
        batch.drop_column("gigabytes")


def downgrade() -> None:
    with op.batch_alter_table("project_quotas") as batch:
        batch.add_column(sa.Column("gigabytes", sa.BigInteger(), nullable=True))
    # Whole GiB, rounded up: a limit below one GiB stays a limit.
    op.execute(f"UPDATE project_quotas SET gigabytes = (max_bytes + {GIB - 1}) / {GIB}")
    with op.batch_alter_table("project_quotas") as batch:
        batch.drop_column("max_bytes")
    with op.batch_alter_table("restore_points") as batch:
        batch.drop_column("quota_bytes")
