"""chart rollups (multi-resolution metric summaries) and the diagnostics state off the runs row

Revision ID: perf_0001
Revises: alerts_0001
Create Date: 2026-11-30

``metric_rollups`` is filled from the stored points of existing runs (set-based, level by
level), so their pages read summaries at once. ``diagnostics_states`` takes each run's
diagnostics state and watermark from ``runs``; the two columns leave the runs row, so a state
write no longer rewrites (and, on PostgreSQL, bloats) it.
"""
import sqlalchemy as sa
from alembic import op

revision = "perf_0001"
down_revision = "alerts_0001"
branch_labels = None
depends_on = None

LEVELS = 4  # level k has buckets of 16**k steps (app/metrics/rollups.py)
FACTOR = 16


def _points_without_rowid() -> None:
    """SQLite: the points become a clustered table (WITHOUT ROWID): the primary key is the
    table, so each point is written once, not to a rowid table and again to the key's index
    (78 -> ~40 bytes a point, and about half the insert work)."""
    op.execute(
        "CREATE TABLE metric_points_clustered (run_id INTEGER NOT NULL REFERENCES runs (id) "
        "ON DELETE CASCADE, name VARCHAR(200) NOT NULL, step INTEGER NOT NULL, value FLOAT, "
        "raw VARCHAR(8), PRIMARY KEY (run_id, name, step)) WITHOUT ROWID")
    op.execute("INSERT INTO metric_points_clustered SELECT run_id, name, step, value, raw "
               "FROM metric_points")
    op.execute("DROP TABLE metric_points")
    op.execute("ALTER TABLE metric_points_clustered RENAME TO metric_points")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _points_without_rowid()
    op.create_table(
        "metric_rollups",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("level", sa.SmallInteger(), primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("bucket", sa.Integer(), primary_key=True),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("vsum", sa.Float(), nullable=True),
        sa.Column("vmin", sa.Float(), nullable=True),
        sa.Column("vmax", sa.Float(), nullable=True),
        sa.Column("first_step", sa.Integer(), nullable=False),
        sa.Column("last_step", sa.Integer(), nullable=False),
        sa.Column("nonfinite", sa.Integer(), nullable=False),
        sa.Column("nonfinite_step", sa.Integer(), nullable=True),
        sa.Column("nonfinite_raw", sa.String(8), nullable=True),
        sqlite_with_rowid=False,
    )
    if op.get_bind().dialect.name == "postgresql":
        # Every batch rewrites its few open buckets and the run row: room on each page lets
        # PostgreSQL update them in place (HOT) instead of leaving dead copies for vacuum.
        op.execute("ALTER TABLE metric_rollups SET (fillfactor = 50)")
        op.execute("ALTER TABLE runs SET (fillfactor = 70)")
    op.execute(
        "INSERT INTO metric_rollups (run_id, level, name, bucket, n, vsum, vmin, vmax, first_step,"
        " last_step, nonfinite, nonfinite_step, nonfinite_raw) "
        f"SELECT run_id, 1, name, step / {FACTOR}, count(value), sum(value), min(value), "
        "max(value), min(step), max(step), count(*) - count(value), "
        "min(CASE WHEN value IS NULL THEN step END), max(raw) "
        f"FROM metric_points GROUP BY run_id, name, step / {FACTOR}")
    for level in range(2, LEVELS + 1):
        op.execute(
            "INSERT INTO metric_rollups (run_id, level, name, bucket, n, vsum, vmin, vmax, "
            "first_step, last_step, nonfinite, nonfinite_step, nonfinite_raw) "
            f"SELECT run_id, {level}, name, bucket / {FACTOR}, sum(n), sum(vsum), min(vmin), "
            "max(vmax), min(first_step), max(last_step), sum(nonfinite), min(nonfinite_step), "
            f"max(nonfinite_raw) FROM metric_rollups WHERE level = {level - 1} "
            f"GROUP BY run_id, name, bucket / {FACTOR}")
    op.create_table(
        "diagnostics_states",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("through", sa.Integer(), nullable=False),
    )
    op.execute("INSERT INTO diagnostics_states (run_id, state, through) "
               "SELECT id, diagnostics_state, coalesce(diagnostics_through, -1) FROM runs "
               "WHERE diagnostics_state IS NOT NULL")
    # Not batch mode: on SQLite that copies ``runs`` to a new table and drops the old one,
    # and with foreign keys on, dropping it deletes every run's points, findings and rollups
    # (ON DELETE CASCADE). SQLite (3.35+) and PostgreSQL both drop a column in place.
    op.execute("ALTER TABLE runs DROP COLUMN diagnostics_state")
    op.execute("ALTER TABLE runs DROP COLUMN diagnostics_through")
    op.add_column("runs", sa.Column("rollups_stale_lo", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("rollups_stale_hi", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE runs DROP COLUMN rollups_stale_hi")
    op.execute("ALTER TABLE runs DROP COLUMN rollups_stale_lo")
    op.add_column("runs", sa.Column("diagnostics_state", sa.JSON(), nullable=True))
    op.add_column("runs", sa.Column("diagnostics_through", sa.Integer(), nullable=True))
    op.execute("UPDATE runs SET diagnostics_state = (SELECT state FROM diagnostics_states d "
               "WHERE d.run_id = runs.id), diagnostics_through = (SELECT through FROM "
               "diagnostics_states d WHERE d.run_id = runs.id)")
    op.drop_table("diagnostics_states")
    op.drop_table("metric_rollups")
