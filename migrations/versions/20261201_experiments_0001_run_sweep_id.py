"""runs.sweep_id: the sweep (POST /api/sweeps) a run was launched by

Revision ID: experiments_0001
Revises: iterate_0001
Create Date: 2026-12-01 00:20:00

A plain nullable column added in place (never batch mode: on SQLite that rebuilds ``runs`` and
its ON DELETE CASCADE empties every run's points), indexed for the sweep page's lookup.
"""
import sqlalchemy as sa
from alembic import op

revision = "experiments_0001"
down_revision = "iterate_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("sweep_id", sa.String(32), nullable=True))
    op.create_index("ix_runs_sweep_id", "runs", ["sweep_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_sweep_id", table_name="runs")
    op.drop_column("runs", "sweep_id")
