"""metric_inbox: received steps, one row per step, spread into metric_points off the request path

Revision ID: inbox_0001
Revises: ingest_0001
Create Date: 2026-12-02 04:10:00

Storing a point was one B-tree row per value (25 per TRL step) on the request path: about 60 %
of the report handler's time (bench/ingest.py, issue 25). A batch now stores one row per step
(its metrics as one JSON object, as trackio does) and ``rollups.settle`` spreads them into
``metric_points`` set-based before anything reads them. Existing summaries stay as they are:
level 1 was kept current at ingest until now, and the stale range above it is still honoured.
"""
import sqlalchemy as sa
from alembic import op

revision = "inbox_0001"
down_revision = "ingest_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "metric_inbox",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("step", sa.Integer(), primary_key=True),
        sa.Column("metrics", sa.Text(), nullable=False),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("metric_inbox")
