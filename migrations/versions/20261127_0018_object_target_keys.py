"""Each object target's data key recorded in the database (the authority its bucket's
`keys/data-key` is checked against), and the fingerprint of the key each restore point was
sealed with.

Nothing is filled in on the way up: a target whose bucket holds its key gets its row the
first time a worker opens it (adopted, once), and a restore point made before this gets its
fingerprint the first time a job reads its manifest with the target's key.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "object_target_keys",
        sa.Column("target", sa.String(64), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("wrapped", sa.LargeBinary(), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.add_column("restore_points", sa.Column("key_fingerprint", sa.String(64), nullable=True))


def downgrade() -> None:
    # The bucket keeps each key; a later upgrade adopts it again.
    op.drop_column("restore_points", "key_fingerprint")
    op.drop_table("object_target_keys")
