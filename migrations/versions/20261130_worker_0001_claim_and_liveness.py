"""run claim ticket and worker liveness

Revision ID: worker_0001
Revises: paths_0001
Create Date: 2026-11-30 16:10:00

claim_hash: the hash of the single-use ticket the queued task carries; the worker trades it for
the run token at claim time, so the broker never holds a token. last_seen_at: the worker's last
sign of life (claim, control polls, reports), which the lost-run check measures silence from.
"""
from alembic import op
import sqlalchemy as sa


revision = 'worker_0001'
down_revision = "paths_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claim_hash', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('last_seen_at')
        batch_op.drop_column('claim_hash')
