"""Idempotency keys: the first answer to a POST that created work, replayed to its retries.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "idempotent_requests",
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("response", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "key", name="pk_idempotent_requests"),
    )
    op.create_index("ix_idempotent_requests_created_at", "idempotent_requests",
                    ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_idempotent_requests_created_at", table_name="idempotent_requests")
    op.drop_table("idempotent_requests")
