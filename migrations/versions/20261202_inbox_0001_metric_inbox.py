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


# Downgrading loses nothing: steps still waiting are spread into metric_points first, and the
# level-1 summaries of every run with a stale range rebuilt over it (the older code keeps
# level 1 current at ingest and recomputes only the levels above from it).
_SPREAD = {
    "sqlite": (
        "INSERT INTO metric_points (run_id, name, step, value, raw) "
        "SELECT i.run_id, m.key, i.step, CASE WHEN m.type = 'text' THEN NULL ELSE m.value END, "
        "CASE WHEN m.type = 'text' THEN m.value END "
        "FROM metric_inbox i, json_each(i.metrics) m WHERE true "
        "ON CONFLICT (run_id, name, step) DO UPDATE SET value = excluded.value, "
        "raw = excluded.raw"),
    "postgresql": (
        "INSERT INTO metric_points (run_id, name, step, value, raw) "
        "SELECT i.run_id, m.key, i.step, "
        "CASE WHEN jsonb_typeof(m.value) = 'number' THEN (m.value)::float8 END, "
        "CASE WHEN jsonb_typeof(m.value) = 'string' THEN m.value #>> '{}' END "
        "FROM metric_inbox i, jsonb_each(i.metrics::jsonb) m "
        "ON CONFLICT (run_id, name, step) DO UPDATE SET value = EXCLUDED.value, "
        "raw = EXCLUDED.raw"),
}
_LEVEL_1 = (
    "INSERT INTO metric_rollups (run_id, level, name, bucket, n, vsum, vmin, vmax, first_step, "
    "last_step, nonfinite, nonfinite_step, nonfinite_raw) "
    "SELECT p.run_id, 1, p.name, p.step / 16, count(p.value), sum(p.value), min(p.value), "
    "max(p.value), min(p.step), max(p.step), count(*) - count(p.value), "
    "min(CASE WHEN p.value IS NULL THEN p.step END), max(p.raw) "
    "FROM metric_points p JOIN runs r ON r.id = p.run_id "
    "WHERE r.rollups_stale_lo IS NOT NULL "
    "AND p.step BETWEEN r.rollups_stale_lo / 16 * 16 AND r.rollups_stale_hi / 16 * 16 + 15 "
    "GROUP BY p.run_id, p.name, p.step / 16 "
    "ON CONFLICT (run_id, level, name, bucket) DO UPDATE SET n = excluded.n, "
    "vsum = excluded.vsum, vmin = excluded.vmin, vmax = excluded.vmax, "
    "first_step = excluded.first_step, last_step = excluded.last_step, "
    "nonfinite = excluded.nonfinite, nonfinite_step = excluded.nonfinite_step, "
    "nonfinite_raw = excluded.nonfinite_raw")


def downgrade() -> None:
    dialect = "postgresql" if op.get_bind().dialect.name == "postgresql" else "sqlite"
    op.execute(_SPREAD[dialect])
    op.execute(_LEVEL_1)
    op.drop_table("metric_inbox")
