"""saved_mappings: a key mapping remembered per log source name (issue 32)

Revision ID: readers_0001
Revises: vocab_0001
Create Date: 2026-12-02 10:10:00
"""
import sqlalchemy as sa
from alembic import op

revision = "readers_0001"
down_revision = "vocab_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "saved_mappings",
        sa.Column("source", sa.String(200), primary_key=True),
        sa.Column("mapping", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
    )


def downgrade() -> None:
    op.drop_table("saved_mappings")
