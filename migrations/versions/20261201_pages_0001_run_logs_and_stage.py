"""run_log_chunks (the training child's stdout/stderr) and runs.stage

Revision ID: pages_0001
Revises: sup_0001
Create Date: 2026-12-01 20:30:00

The column is added in place (never batch mode: on SQLite that rebuilds ``runs`` and its ON
DELETE CASCADE empties every run's points).
"""
import sqlalchemy as sa
from alembic import op

revision = "pages_0001"
down_revision = "sup_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("stage", sa.String(20), nullable=True))
    op.create_table(
        "run_log_chunks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("stream", sa.String(8), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.UniqueConstraint("run_id", "stream", "offset"),
    )
    op.create_index("ix_run_log_chunks_run_id", "run_log_chunks", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_run_log_chunks_run_id", table_name="run_log_chunks")
    op.drop_table("run_log_chunks")
    op.drop_column("runs", "stage")
