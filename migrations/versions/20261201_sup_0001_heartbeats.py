"""heartbeats: the last sign of life of each scheduler and worker process

Revision ID: sup_0001
Revises: experiments_0001
Create Date: 2026-12-01 20:10:00
"""
import sqlalchemy as sa
from alembic import op

revision = "sup_0001"
down_revision = "experiments_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "heartbeats",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("kind", "name"),
    )
    op.create_index("ix_heartbeats_last_seen_at", "heartbeats", ["last_seen_at"])


def downgrade() -> None:
    op.drop_index("ix_heartbeats_last_seen_at", table_name="heartbeats")
    op.drop_table("heartbeats")
