"""diagnostics state revision and watermark

Revision ID: paths_0001
Revises: auth_0001
Create Date: 2026-11-30 16:40:00
"""
from alembic import op
import sqlalchemy as sa


revision = 'paths_0001'
down_revision = 'auth_0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('diagnostics_revision', sa.Integer(), nullable=False,
                                      server_default='0'))
        batch_op.add_column(sa.Column('diagnostics_through', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('diagnostics_through')
        batch_op.drop_column('diagnostics_revision')
