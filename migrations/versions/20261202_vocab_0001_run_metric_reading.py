"""runs.metric_reading: how a run's metric keys are read (vocabulary, user mapping, renames)

Revision ID: vocab_0001
Revises: inbox_0001
Create Date: 2026-12-02 09:50:00

A live run's keys were read with TRL's names only; they are now read like an import's (verl's
and OpenRLHF's tables, the user's ``metric_map``), and the reading is kept with the run so
every later batch is read the same way (app/metrics/reading.py). Existing runs have none: their
next batch (if any) starts one.
"""
import sqlalchemy as sa
from alembic import op

revision = "vocab_0001"
down_revision = "inbox_0001"
branch_labels = None
depends_on = None


# Plain ALTER TABLE, not batch mode: SQLite's batch mode copies ``runs`` and drops the old
# table, and that drop cascades to every row that references a run (their points, states...).
def upgrade() -> None:
    op.add_column("runs", sa.Column("metric_reading", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "metric_reading")
