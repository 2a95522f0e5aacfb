"""Migration chunks_0001 on databases that hold points: every point (NaN/inf, sparse and huge
steps, a metric longer than one read slice) moves into chunks and reads back the same through
the store, and the level-1 summaries go (computed when drawn); the downgrade puts back the very
rows and their level-1 summaries; upgrading again gives the same chunks."""

from __future__ import annotations

import math

import sqlalchemy as sa
from sqlalchemy.orm import Session

from app.metrics import store
from tests.conftest import migrate

LONG = 70_000  # one metric's points: more than the migration's read slice (65,536)
Rows = dict[tuple[int, str, int], tuple[float | None, str | None]]


def _points() -> Rows:
    """Three runs' points as the old table held them: (run, name, step) -> (value, raw)."""
    out: Rows = {}
    for step in range(LONG):
        out[(1, "loss", step)] = (1.0 / (step + 1), None)
    for step in (0, 5, 1023, 1024, 1025, 4096, 2**31 - 1):  # sparse, chunk edges, the largest
        out[(1, "reward", step)] = (step % 7 / 7, None)
    out[(1, "reward", 77)] = (None, "nan")
    out[(1, "reward", 78)] = (None, "inf")
    out[(1, "reward", 79)] = (None, "-inf")
    for step in range(1, 3000, 3):
        out[(2, "kl", step)] = (-step * 1e-300, None)
        out[(2, "k" * 200, step)] = (math.pi * step, None)
    out[(2, "kl", 3000)] = (None, "nan")  # a chunk whose last value is not finite
    return out


def _old_rows(engine: sa.Engine) -> Rows:
    with engine.begin() as c:
        return {(r, n, s): (v, raw) for r, n, s, v, raw in c.execute(sa.text(
            "SELECT run_id, name, step, value, raw FROM metric_points"))}


def _read_back(engine: sa.Engine) -> Rows:
    out: Rows = {}
    with Session(engine) as db:
        for run_id in (1, 2, 3):
            for name, (steps, values) in store.read(db, run_id).items():
                for step, value in zip(steps.tolist(), values.tolist(), strict=True):
                    out[(run_id, name, step)] = ((value, None) if math.isfinite(value)
                                                 else (None, repr(value)))
    return out


def _chunks(engine: sa.Engine) -> list[tuple]:
    with engine.begin() as c:
        return [tuple(r) for r in c.execute(sa.text(
            "SELECT c.run_id, k.name, c.chunk, c.first_step, c.last_step, c.n, c.last_finite "
            "FROM metric_chunks c JOIN metric_keys k ON k.id = c.metric_id "
            "ORDER BY c.run_id, k.name, c.chunk"))]


def test_points_move_into_chunks_and_back_and_again(empty_database: str) -> None:
    url = empty_database
    migrate(url, "answers_0001", "upgrade")
    engine = sa.create_engine(url)
    points = _points()
    with engine.begin() as c:
        for run_id in (1, 2, 3):  # run 3 logged nothing
            c.execute(sa.text(
                "INSERT INTO runs (id, name, source, spec, status, max_steps, current_step, "
                "diagnostics_revision) VALUES (:id, 'r', 'launched', '{}', 'succeeded', 10, 0, 0)"),
                {"id": run_id})
        c.execute(sa.text("INSERT INTO metric_points (run_id, name, step, value, raw) "
                          "VALUES (:r, :n, :s, :v, :raw)"),
                  [{"r": r, "n": n, "s": s, "v": v, "raw": raw}
                   for (r, n, s), (v, raw) in points.items()])
    migrate(url, "head", "upgrade")
    assert _read_back(engine) == points
    first = _chunks(engine)
    assert len([c for c in first if c[1] == "loss"]) == math.ceil(LONG / 1024)
    assert ("kl" in {c[1] for c in first}) and all(
        c[6] is not None for c in first if c[1] == "kl")  # the last *finite* value
    with engine.begin() as c:
        assert not sa.inspect(c).has_table("metric_points")
        assert c.execute(sa.text("SELECT count(*) FROM metric_rollups WHERE level = 1")
                         ).scalar() == 0  # computed from the points when drawn
    migrate(url, "answers_0001", "downgrade")
    assert _old_rows(engine) == points
    with engine.begin() as c:  # the older code reads level 1 from the table: rebuilt
        level1 = c.execute(sa.text("SELECT run_id, name, bucket, n + nonfinite FROM "
                                   "metric_rollups WHERE level = 1")).all()
    buckets: dict[tuple[int, str, int], int] = {}
    for run_id, name, step in points:
        key = (run_id, name, step // 16)
        buckets[key] = buckets.get(key, 0) + 1
    assert {(r, n, b): count for r, n, b, count in level1} == buckets
    with engine.begin() as c:
        assert not sa.inspect(c).has_table("metric_chunks")
    migrate(url, "head", "upgrade")
    assert _read_back(engine) == points
    assert _chunks(engine) == first
    engine.dispose()
