"""Migration perf_0001 on a database that already holds a run: its points get their chart
summaries, its diagnostics state moves to ``diagnostics_states``, and nothing else is lost (on
SQLite a table rebuild of ``runs`` would have cascaded into every child table). Downgrading
puts the state back on the run row."""

from __future__ import annotations

import json

import sqlalchemy as sa

from tests.conftest import migrate


def test_existing_runs_keep_everything_and_gain_summaries(empty_database: str) -> None:
    url = empty_database
    migrate(url, "alerts_0001", "upgrade")
    engine = sa.create_engine(url)
    with engine.begin() as c:
        c.execute(sa.text(
            "INSERT INTO runs (id, name, source, spec, status, max_steps, current_step, "
            "diagnostics_state, diagnostics_through, diagnostics_revision) VALUES "
            "(1, 'r', 'launched', '{}', 'running', 10, 0, :state, 39, 3)"),
            {"state": json.dumps({"version": 1, "kept": True})})
        c.execute(sa.text("INSERT INTO metric_points (run_id, name, step, value, raw) "
                          "VALUES (1, 'loss', :s, :v, :r)"),
                  [{"s": s, "v": None if s == 20 else float(s), "r": "nan" if s == 20 else None}
                   for s in range(40)])
    migrate(url, "answers_0001", "upgrade")
    with engine.begin() as c:
        assert c.execute(sa.text("SELECT count(*) FROM metric_points")).scalar() == 40
        level1 = c.execute(sa.text(
            "SELECT bucket, n, vsum, vmin, vmax, first_step, last_step, nonfinite, "
            "nonfinite_step, nonfinite_raw FROM metric_rollups WHERE level = 1 "
            "ORDER BY bucket")).all()
        assert [tuple(r) for r in level1] == [
            (0, 16, 120.0, 0.0, 15.0, 0, 15, 0, None, None),
            (1, 15, 356.0, 16.0, 31.0, 16, 31, 1, 20, "nan"),
            (2, 8, 284.0, 32.0, 39.0, 32, 39, 0, None, None)]
        top = c.execute(sa.text("SELECT n, nonfinite FROM metric_rollups WHERE level = 4")).all()
        assert [tuple(r) for r in top] == [(39, 1)]
        moved = c.execute(sa.text("SELECT run_id, through, state FROM diagnostics_states")).one()
        state = moved[2] if isinstance(moved[2], dict) else json.loads(moved[2])
        assert (moved[0], moved[1], state) == (1, 39, {"version": 1, "kept": True})
        assert "diagnostics_state" not in {c["name"] for c in sa.inspect(c).get_columns("runs")}
    migrate(url, "alerts_0001", "downgrade")
    with engine.begin() as c:
        back = c.execute(sa.text("SELECT diagnostics_state, diagnostics_through FROM runs")).one()
        assert (json.loads(back[0]) if isinstance(back[0], str) else back[0]) == {
            "version": 1, "kept": True}
        assert back[1] == 39
        assert c.execute(sa.text("SELECT count(*) FROM metric_points")).scalar() == 40
    engine.dispose()


def test_downgrading_the_inbox_spreads_what_waits_in_it(empty_database: str) -> None:
    url = empty_database
    """inbox_0001's downgrade: steps still waiting become points, and their level-1 summaries
    are rebuilt, which the older code expects current (it recomputes only the levels above)."""
    migrate(url, "answers_0001", "upgrade")
    engine = sa.create_engine(url)
    with engine.begin() as c:
        c.execute(sa.text(
            "INSERT INTO runs (id, name, source, spec, status, max_steps, current_step, "
            "rollups_stale_lo, rollups_stale_hi) VALUES "
            "(1, 'r', 'launched', '{}', 'running', 40, 20, 17, 20)"))
        c.execute(sa.text("INSERT INTO metric_points (run_id, name, step, value) "
                          "VALUES (1, 'loss', :s, :v)"), [{"s": s, "v": 1.0} for s in range(17)])
        c.execute(sa.text("INSERT INTO metric_inbox (run_id, step, metrics) VALUES (1, :s, :m)"),
                  [{"s": s, "m": json.dumps({"loss": 2.0, "kl": "nan" if s == 20 else 0.5})}
                   for s in range(17, 21)])
    migrate(url, "ingest_0001", "downgrade")
    with engine.begin() as c:
        points = {(n, s): (v, r) for n, s, v, r in c.execute(sa.text(
            "SELECT name, step, value, raw FROM metric_points"))}
        assert len(points) == 17 + 8
        assert points[("loss", 18)] == (2.0, None) and points[("kl", 20)] == (None, "nan")
        level1 = {(r[0], r[1]): tuple(r[2:]) for r in c.execute(sa.text(
            "SELECT name, bucket, n, vsum, nonfinite, nonfinite_step FROM metric_rollups "
            "WHERE level = 1"))}
        assert level1 == {("loss", 1): (5, 9.0, 0, None), ("kl", 1): (3, 1.5, 1, 20)}
    engine.dispose()
