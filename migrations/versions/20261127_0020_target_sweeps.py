"""Each object target counts its sweeps (exclusive leases taken), so a retried backup can
tell whether the chunks its killed attempt confirmed stored may have been swept since
(`worker/engine/upload_checkpoint.py`).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("target_lease_gates",
                  sa.Column("sweeps", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    op.drop_column("target_lease_gates", "sweeps")
