"""finding stability memory (a verdict that does not flap)

Revision ID: verdict_0001
Revises: worker_0001
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = "verdict_0001"
down_revision = "worker_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("findings") as batch:
        batch.add_column(sa.Column("stability", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("findings") as batch:
        batch.drop_column("stability")
