"""dry_runs.started_at, last_seen_at, worker (a dry run's worker is watched); runs.marker_key

Revision ID: harden2_0001
Revises: readers_0001
Create Date: 2026-12-02 09:50:00

A dry run whose worker was killed stayed "queued" forever (issue 33): on the embedded broker
nothing redelivers a message its consumer took. The worker now says when it starts a dry run and
keeps saying it is alive while the sampling child runs; the scheduler fails a dry run whose
worker went silent (``app.dryruns.lost``). ``runs.marker_key`` signs the rank lines the
Devices panel believes (``grpodeck.contract.log_markers``): user code printing such lines was
believed.
"""
import sqlalchemy as sa
from alembic import op

revision = "harden2_0001"
down_revision = "readers_0001"
branch_labels = None
depends_on = None


# Plain ALTER TABLE, not batch mode: SQLite's batch mode copies a table and drops the old one,
# and dropping ``runs`` cascades to every row that references a run (points, states...).
def upgrade() -> None:
    op.add_column("dry_runs", sa.Column("started_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("dry_runs", sa.Column("last_seen_at", sa.DateTime(timezone=True),
                                        nullable=True))
    op.add_column("dry_runs", sa.Column("worker", sa.String(200), nullable=True))
    op.add_column("runs", sa.Column("marker_key", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "marker_key")
    op.drop_column("dry_runs", "worker")
    op.drop_column("dry_runs", "last_seen_at")
    op.drop_column("dry_runs", "started_at")
