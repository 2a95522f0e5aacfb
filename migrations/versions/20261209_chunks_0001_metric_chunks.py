"""metric_chunks, metric_keys: points as compressed per-metric chunks instead of one row each

Revision ID: chunks_0001
Revises: answers_0001
Create Date: 2026-12-09 04:00:00

One B-tree row per point took 46 bytes a point on SQLite and 173-220 on PostgreSQL (issue 57),
and a whole series was one Python tuple per point. The points of one metric over an aligned
range of 1,024 steps are now one row: steps and values byte-shuffled and zstd-compressed
(``app/metrics/chunks.py``), keyed by the run, the metric's id (``metric_keys``: a name is
stored once) and the range. The inbox is unchanged; summary level 1 (buckets of 16 steps, 94 %
of ``metric_rollups``) is no longer stored: a chart computes it from the points it draws
(``app/metrics/bucket_stats.py``), and levels 2-4 stay as they are.

The move reads the points one run and metric at a time, in step order (a server-side cursor
on PostgreSQL), so memory stays bounded by one metric's slice whatever the database's size.
It runs inside the migration's transaction: the Deck is stopped while it runs (docs/
deploying.md gives the time per million points). The downgrade decodes the chunks back into
rows.
"""
import numpy as np
import sqlalchemy as sa
from alembic import op

from app.metrics import chunks

revision = "chunks_0001"
down_revision = "answers_0001"
branch_labels = None
depends_on = None

SLICE = 64 * chunks.CHUNK_STEPS  # points of one metric read per fetch
_RAW = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}


def _create() -> None:
    op.create_table(
        "metric_keys",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
    )
    op.create_table(
        "metric_chunks",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("metric_id", sa.Integer(), primary_key=True),
        sa.Column("chunk", sa.Integer(), primary_key=True),
        sa.Column("first_step", sa.Integer(), nullable=False),
        sa.Column("last_step", sa.Integer(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("last_finite", sa.Float(), nullable=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sqlite_with_rowid=False,
    )
    if op.get_bind().dialect.name == "postgresql":
        # already compressed: no pglz attempt on every write, stored out of line as it is
        op.execute("ALTER TABLE metric_chunks ALTER COLUMN data SET STORAGE EXTERNAL")


_INSERT_CHUNK = sa.text(
    "INSERT INTO metric_chunks (run_id, metric_id, chunk, first_step, last_step, n, "
    "last_finite, data) VALUES (:run_id, :metric_id, :chunk, :first_step, :last_step, :n, "
    ":last_finite, :data)")


def _chunk_rows(run_id: int, metric_id: int, steps: np.ndarray,
                values: np.ndarray) -> list[dict[str, object]]:
    return [{"run_id": run_id, "metric_id": metric_id, "chunk": chunk, **chunks.columns(s, v)}
            for chunk, (s, v) in chunks.split((steps, values))]


def _move_metric(bind: sa.Connection, run_id: int, name: str, metric_id: int) -> None:
    """One metric's points into chunks, SLICE points per read; the last chunk read is held
    back until the next read shows it complete."""
    steps, values = np.empty(0, np.int64), np.empty(0, np.float64)
    after = -1
    while True:
        got = bind.execute(sa.text(
            "SELECT step, value, raw FROM metric_points WHERE run_id = :run AND name = :name "
            "AND step > :after ORDER BY step LIMIT :limit"),
            {"run": run_id, "name": name, "after": after, "limit": SLICE}).all()
        if not got:
            if steps.size:
                bind.execute(_INSERT_CHUNK, _chunk_rows(run_id, metric_id, steps, values))
            return
        steps = np.concatenate([steps, np.array([r[0] for r in got], np.int64)])
        values = np.concatenate([values, np.array(
            [r[1] if r[1] is not None else _RAW.get(r[2] or "nan", np.nan) for r in got],
            np.float64)])
        after = int(steps[-1])
        open_ = (steps >> chunks.CHUNK_BITS) == (steps[-1] >> chunks.CHUNK_BITS)
        if not open_.all():
            bind.execute(_INSERT_CHUNK, _chunk_rows(run_id, metric_id, steps[~open_],
                                                     values[~open_]))
        steps, values = steps[open_], values[open_]


def upgrade() -> None:
    _create()
    bind = op.get_bind()
    op.execute("INSERT INTO metric_keys (name) SELECT DISTINCT name FROM metric_points "
               "ORDER BY name")
    ids = dict(bind.execute(sa.text("SELECT name, id FROM metric_keys")).tuples().all())
    for run_id in bind.execute(sa.text("SELECT id FROM runs ORDER BY id")).scalars().all():
        names = bind.execute(sa.text("SELECT DISTINCT name FROM metric_points WHERE run_id = :r"),
                             {"r": run_id}).scalars().all()
        for name in names:
            _move_metric(bind, run_id, name, ids[name])
    op.drop_table("metric_points")
    op.execute("DELETE FROM metric_rollups WHERE level = 1")


# The older code reads level 1 from the table: rebuilt from the points put back.
_LEVEL_1 = (
    "INSERT INTO metric_rollups (run_id, level, name, bucket, n, vsum, vmin, vmax, first_step, "
    "last_step, nonfinite, nonfinite_step, nonfinite_raw) "
    "SELECT run_id, 1, name, step / 16, count(value), sum(value), min(value), max(value), "
    "min(step), max(step), count(*) - count(value), "
    "min(CASE WHEN value IS NULL THEN step END), max(raw) FROM metric_points "
    "GROUP BY run_id, name, step / 16")


def downgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    if postgres:  # no foreign key there (migration ingest_0001)
        op.execute("CREATE TABLE metric_points (run_id INTEGER NOT NULL, name VARCHAR(200) NOT "
                   "NULL, step INTEGER NOT NULL, value FLOAT, raw VARCHAR(8), "
                   "PRIMARY KEY (run_id, name, step))")
    else:
        op.execute("CREATE TABLE metric_points (run_id INTEGER NOT NULL REFERENCES runs (id) "
                   "ON DELETE CASCADE, name VARCHAR(200) NOT NULL, step INTEGER NOT NULL, "
                   "value FLOAT, raw VARCHAR(8), PRIMARY KEY (run_id, name, step)) "
                   "WITHOUT ROWID")
    insert = sa.text("INSERT INTO metric_points (run_id, name, step, value, raw) "
                     "VALUES (:run_id, :name, :step, :value, :raw)")
    keys = bind.execute(sa.text("SELECT run_id, metric_id, chunk FROM metric_chunks "
                                "ORDER BY run_id, metric_id, chunk")).all()
    names = dict(bind.execute(sa.text("SELECT id, name FROM metric_keys")).tuples().all())
    for run_id, metric_id, chunk in keys:
        n, data = bind.execute(sa.text(
            "SELECT n, data FROM metric_chunks WHERE run_id = :r AND metric_id = :m "
            "AND chunk = :c"), {"r": run_id, "m": metric_id, "c": chunk}).one()
        steps, values = chunks.decode(bytes(data), n)
        bind.execute(insert, [
            {"run_id": run_id, "name": names[metric_id], "step": s,
             "value": v if np.isfinite(v) else None, "raw": None if np.isfinite(v) else repr(v)}
            for s, v in zip(steps.tolist(), values.tolist(), strict=True)])
    op.execute(_LEVEL_1)
    op.drop_table("metric_chunks")
    op.drop_table("metric_keys")
