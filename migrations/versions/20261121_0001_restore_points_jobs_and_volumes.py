"""restore points, jobs and volumes

Revision ID: 0001
Revises:
Create Date: 2026-11-21 20:37:33.371008+00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('volumes',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('project_id', sa.String(length=64), nullable=False),
    sa.Column('cluster', sa.String(length=64), nullable=False),
    sa.Column('pool', sa.String(length=128), nullable=False),
    sa.Column('image', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_volumes')),
    sa.UniqueConstraint('project_id', 'cluster', 'pool', 'image', name=op.f('uq_volumes_project_id_cluster_pool_image'))
    )
    with op.batch_alter_table('volumes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_volumes_project_id'), ['project_id'], unique=False)

    op.create_table('restore_points',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('project_id', sa.String(length=64), nullable=False),
    sa.Column('volume_id', sa.String(length=36), nullable=False),
    sa.Column('target', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('status_reason', sa.Text(), nullable=True),
    sa.Column('size_bytes', sa.BigInteger(), nullable=True),
    sa.Column('bytes_copied', sa.BigInteger(), nullable=True),
    sa.Column('duration_seconds', sa.Float(), nullable=True),
    sa.Column('checksum_algorithm', sa.String(length=32), nullable=True),
    sa.Column('objects_checksummed', sa.BigInteger(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('completed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['volume_id'], ['volumes.id'], name=op.f('fk_restore_points_volume_id_volumes')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_restore_points'))
    )
    with op.batch_alter_table('restore_points', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_restore_points_project_id_created_at_id'), ['project_id', 'created_at', 'id'], unique=False)
        batch_op.create_index(batch_op.f('ix_restore_points_volume_id'), ['volume_id'], unique=False)

    op.create_table('jobs',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('project_id', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('volume_id', sa.String(length=36), nullable=True),
    sa.Column('restore_point_id', sa.String(length=36), nullable=True),
    sa.Column('restore_target', sa.String(length=512), nullable=True),
    sa.Column('qos_bytes_per_second', sa.BigInteger(), nullable=True),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('max_attempts', sa.Integer(), nullable=False),
    sa.Column('bytes_done', sa.BigInteger(), nullable=False),
    sa.Column('bytes_total', sa.BigInteger(), nullable=True),
    sa.Column('read_seconds', sa.Float(), nullable=False),
    sa.Column('write_seconds', sa.Float(), nullable=False),
    sa.Column('qos_wait_seconds', sa.Float(), nullable=False),
    sa.Column('worker', sa.String(length=255), nullable=True),
    sa.Column('error_code', sa.String(length=64), nullable=True),
    sa.Column('error_message', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('queued_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['restore_point_id'], ['restore_points.id'], name=op.f('fk_jobs_restore_point_id_restore_points')),
    sa.ForeignKeyConstraint(['volume_id'], ['volumes.id'], name=op.f('fk_jobs_volume_id_volumes')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs'))
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_jobs_project_id_created_at'), ['project_id', 'created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_jobs_restore_point_id'), ['restore_point_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_jobs_status_queued_at'), ['status', 'queued_at'], unique=False)
        batch_op.create_index('uq_jobs_active_backup_volume', ['volume_id'], unique=True, sqlite_where=sa.text("kind = 'backup' AND status IN ('queued', 'running')"), postgresql_where=sa.text("kind = 'backup' AND status IN ('queued', 'running')"))



def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('uq_jobs_active_backup_volume', sqlite_where=sa.text("kind = 'backup' AND status IN ('queued', 'running')"), postgresql_where=sa.text("kind = 'backup' AND status IN ('queued', 'running')"))
        batch_op.drop_index(batch_op.f('ix_jobs_status_queued_at'))
        batch_op.drop_index(batch_op.f('ix_jobs_restore_point_id'))
        batch_op.drop_index(batch_op.f('ix_jobs_project_id_created_at'))

    op.drop_table('jobs')
    with op.batch_alter_table('restore_points', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_restore_points_volume_id'))
        batch_op.drop_index(batch_op.f('ix_restore_points_project_id_created_at_id'))

    op.drop_table('restore_points')
    with op.batch_alter_table('volumes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_volumes_project_id'))

    op.drop_table('volumes')
