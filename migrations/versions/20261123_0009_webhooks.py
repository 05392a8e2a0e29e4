"""Webhooks: a project's endpoints for events, and the outbox of event deliveries (to
webhooks, and to OpenStack's notification bus).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("description", sa.String(255), nullable=True),
        sa.Column("event_types", sa.Text(), nullable=False),
        sa.Column("secrets", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("failed_deliveries", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_webhooks"),
    )
    op.create_index("ix_webhooks_project_id", "webhooks", ["project_id"])
    op.create_table(
        "event_deliveries",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("webhook_id", sa.String(36), nullable=True),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["webhook_id"], ["webhooks.id"], ondelete="CASCADE",
                                name="fk_event_deliveries_webhook_id_webhooks"),
        sa.PrimaryKeyConstraint("id", name="pk_event_deliveries"),
    )
    op.create_index("ix_event_deliveries_webhook_id", "event_deliveries", ["webhook_id"])
    op.create_index("ix_event_deliveries_due", "event_deliveries",
                    ["status", "next_attempt_at"])


def downgrade() -> None:
    op.drop_table("event_deliveries")
    op.drop_table("webhooks")
