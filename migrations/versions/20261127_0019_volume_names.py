"""Each volume's Cinder name as Cairn last learnt it, so jobs and restore points can name a
volume as its tenant does (`demo`), not as Ceph does (`ceph-a/volumes/volume-<uuid>`).

Nothing is filled in on the way up: a volume gets its name the next time it is named for a
backup or a plan.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("volumes", sa.Column("name", sa.String(255), nullable=True))


def downgrade() -> None:
    op.drop_column("volumes", "name")
