"""Instant restores and job phase timings: a restore job says how it restores (`copy`,
or `instant`: a clone of the backup snapshot made usable at once and flattened after),
the new Cinder volume an instant restore asks Cinder to adopt
(`restore_volume_spec`, JSON), when its volume became usable (`ready_at`, before `finished_at` for an instant restore),
and how long each phase of a job took (`phase_seconds`, JSON).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


# ADD COLUMN in place on both backends: a batch copy of the table would have to carry the
# partial unique indexes over by hand.
def upgrade() -> None:
    op.add_column("jobs", sa.Column("restore_method", sa.String(16), nullable=False,
                                    server_default="copy"))
    op.add_column("jobs", sa.Column("restore_volume_spec", sa.Text(), nullable=True))
    op.add_column("jobs", sa.Column("ready_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("jobs", sa.Column("phase_seconds", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "phase_seconds")
    op.drop_column("jobs", "ready_at")
    op.drop_column("jobs", "restore_volume_spec")
    op.drop_column("jobs", "restore_method")
