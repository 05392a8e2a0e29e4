"""A job's copy rate column gets the name the code uses: rate_bytes_per_second (the API
keeps the old name as a deprecated alias).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


# RENAME COLUMN in place on both backends (SQLite >= 3.25): a batch copy of the table would
# have to carry the partial unique indexes over by hand.
def upgrade() -> None:
    op.execute("ALTER TABLE jobs RENAME COLUMN throughput_bytes_per_second TO "
               "rate_bytes_per_second")


def downgrade() -> None:
    op.execute("ALTER TABLE jobs RENAME COLUMN rate_bytes_per_second TO "
               "throughput_bytes_per_second")
