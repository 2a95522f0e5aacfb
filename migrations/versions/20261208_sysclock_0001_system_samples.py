"""system_samples: the client's system samples keyed by their own time, not by step

Revision ID: sysclock_0001
Revises: quota_0001
Create Date: 2026-12-08 02:00:00

The system charts are drawn against the clock because an evaluation or a checkpoint save spends
minutes inside one step, yet every sample was stored under the latest logged step, and
``metric_points`` keeps one value per step and name: the samples of a 12 s evaluation were one
point (issue 56). Each sample is now also a row of its own, keyed by its ``system/time``.
"""
import sqlalchemy as sa
from alembic import op

revision = "sysclock_0001"
down_revision = "quota_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "system_samples",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("at_ms", sa.BigInteger(), primary_key=True),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("metrics", sa.Text(), nullable=False),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("system_samples")
