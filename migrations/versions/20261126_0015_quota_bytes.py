"""The storage quota counts bytes: each restore point's `quota_bytes` (what it counts
against its project's storage quota: while `creating` the room it reserved, once committed
what it holds on its target beyond `quota_basis_id`, its chain's previous restore point
held), `added_bytes` (what it added when it was committed: what the next backup of its
chain reserves), and a project's limit in bytes (`max_bytes`), so a limit below a GiB can be
set (docs/scheduling.md, Quotas).

`project_quotas.gigabytes` stays for one release, nullable and kept in step (whole GiB,
rounded up): during a rolling upgrade the old processes still read it, and after a rollback
the old code enforces it. Limits above 2^32 GiB (what the API accepts) are clamped to it:
2^33 GiB and more do not fit a BIGINT of bytes (PostgreSQL refused the upgrade; SQLite
stored a REAL that the API could not read back).

Committed restore points get their bytes copied as a first figure (sent bytes are
compressed on object targets, so those take the bytes read); `added_bytes` stays NULL on
them, which marks them for measuring: the next backup or delete of their volume on their
target measures what each really holds (`services/quotas/chains.py`).

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
MAX_GIB = 1 << 32
"""The API's largest limit in GiB; in bytes (2^62) it fits a BIGINT."""

OBJECT_TARGET_CHECKSUM = "blake3-keyed"
"""What an object target's restore points record as their checksum algorithm
(`worker/managers/object_backup.CHECKSUM_ALGORITHM`)."""


def upgrade() -> None:
    with op.batch_alter_table("restore_points") as batch:
        batch.add_column(sa.Column("quota_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("added_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("quota_basis_id", sa.String(36), nullable=True))
    op.execute(
        "UPDATE restore_points SET quota_bytes = CASE "
        f"WHEN checksum_algorithm = '{OBJECT_TARGET_CHECKSUM}' THEN COALESCE(bytes_read, 0) "
        "ELSE COALESCE(bytes_copied, 0) END "
        "WHERE quota_bytes IS NULL AND completed_at IS NOT NULL "
        "AND status IN ('available', 'deleting', 'error')")
    op.execute("UPDATE restore_points SET quota_bytes = 0 WHERE quota_bytes IS NULL")
    with op.batch_alter_table("project_quotas") as batch:
        batch.add_column(sa.Column("max_bytes", sa.BigInteger(), nullable=True))
    op.execute("UPDATE project_quotas SET max_bytes = CASE "
               "WHEN gigabytes < 0 THEN 0 "
               f"WHEN gigabytes > {MAX_GIB} THEN {MAX_GIB * GIB} "
               f"ELSE gigabytes * {GIB} END "
               "WHERE gigabytes IS NOT NULL")
    op.execute(f"UPDATE project_quotas SET gigabytes = {MAX_GIB} WHERE gigabytes > {MAX_GIB}")


def downgrade() -> None:
    # Whole GiB, rounded up: a limit below one GiB stays a limit.
    op.execute("UPDATE project_quotas SET gigabytes = CASE WHEN max_bytes IS NULL THEN NULL "
               f"ELSE (max_bytes + {GIB - 1}) / {GIB} END")
    with op.batch_alter_table("project_quotas") as batch:
        batch.drop_column("max_bytes")
    with op.batch_alter_table("restore_points") as batch:
        batch.drop_column("quota_basis_id")
        batch.drop_column("added_bytes")
        batch.drop_column("quota_bytes")
