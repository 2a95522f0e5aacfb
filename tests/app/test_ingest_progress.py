"""Metric ingest: points, run progress and the last-report time that the lost check reads.

``_update_progress`` is fed explicit clock values so the smoothed seconds-per-step is checked
to the digit; the database part runs on a real SQLite file (the PostgreSQL upsert is covered by
tests/app/test_api.py on both backends).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

import app.models  # noqa: F401  (every table on the metadata)
from app.core.db import Base
from app.diagnostics import diagnose
from app.health.service import context_for
from app.metrics.ingest import _update_progress, ingest, to_points, upsert_points
from app.metrics.models import MetricPoint
from app.runs.models import Run

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def make_run(**fields: object) -> Run:
    base: dict[str, object] = {"id": 1, "name": "r", "spec": {}, "status": "running",
                               "max_steps": 100, "current_step": 0}
    return Run(**{**base, **fields})


@pytest.fixture
def db(tmp_path) -> Iterator[Session]:  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite:///{tmp_path / 'ingest.db'}")
    Base.metadata.create_all(engine)
    with Session(engine) as session:
        run = make_run(status="running")
        session.add(run)
        session.commit()
        yield session
    engine.dispose()


def stored(db: Session) -> dict[tuple[int, str], tuple[float | None, str | None]]:
    return {(p.step, p.name): (p.value, p.raw) for p in db.scalars(select(MetricPoint))}


# --- points ---------------------------------------------------------------------------------

def test_later_row_for_the_same_step_and_name_wins() -> None:
    points = to_points(7, [(1, {"reward": 0.1, "kl": 0.5}), (1, {"reward": 0.9}), (2, {"reward": 0.2})])
    by_key = {(p[2], p[1]): p for p in points}
    assert len(points) == 3
    assert by_key[(1, "reward")] == (7, "reward", 1, 0.9, None)  # run, name, step, value, raw
    assert by_key[(1, "kl")][3] == 0.5 and by_key[(2, "reward")][3] == 0.2
    assert [(name, step) for _, name, step, _, _ in points] == [
        ("kl", 1), ("reward", 1), ("reward", 2)]


def test_non_finite_values_are_kept_as_their_text() -> None:
    points = {p[1]: p[3:] for p in to_points(1, [(3, {"a": math.nan, "b": math.inf,
                                                       "c": -math.inf, "d": 0.0})])}
    assert points["a"] == (None, "nan")
    assert points["b"] == (None, "inf")
    assert points["c"] == (None, "-inf")
    assert points["d"] == (0.0, None)


def test_long_names_are_cut_to_the_column_size() -> None:
    (point,) = to_points(1, [(1, {"x" * 250: 1.0})])
    assert point[1] == "x" * 200


def test_upsert_overwrites_instead_of_duplicating(db: Session) -> None:
    upsert_points(db, to_points(1, [(1, {"reward": 0.1, "loss": math.nan})]))
    upsert_points(db, to_points(1, [(1, {"reward": 0.7, "loss": 2.0}), (2, {"reward": 0.2})]))
    db.commit()
    assert stored(db) == {(1, "reward"): (0.7, None), (1, "loss"): (2.0, None),
                          (2, "reward"): (0.2, None)}
    upsert_points(db, to_points(1, [(1, {"loss": math.inf})]))
    db.commit()
    assert stored(db)[(1, "loss")] == (None, "inf")


def test_upsert_on_pg_overwrites(pg_database: str) -> None:
    """PostgreSQL takes its own dialect's upsert (named without "postgresql" so that
    `make mutation`, which runs SQLite only, still runs it)."""
    engine = create_engine(pg_database)
    Base.metadata.create_all(engine)
    try:
        with Session(engine) as session:
            session.add(make_run())
            session.commit()
            upsert_points(session, to_points(1, [(1, {"reward": 0.1})]))
            upsert_points(session, to_points(1, [(1, {"reward": 0.6, "kl": math.nan})]))
            session.commit()
            assert stored(session) == {(1, "reward"): (0.6, None), (1, "kl"): (None, "nan")}
    finally:
        engine.dispose()


def test_ingest_counts_points_and_moves_the_step(db: Session) -> None:
    run = db.get(Run, 1)
    assert ingest(db, run, [(1, {"reward": 0.1, "loss": 0.0}), (2, {"reward": 0.2})]) == 3
    db.commit()
    assert run.current_step == 2 and run.last_step_at is not None
    assert set(stored(db)) == {(1, "reward"), (1, "loss"), (2, "reward")}


# --- progress -------------------------------------------------------------------------------

def test_an_out_of_order_batch_never_lowers_the_step() -> None:
    run = make_run(current_step=10, last_step_at=T0)
    _update_progress(run, 4, T0 + timedelta(seconds=30))
    assert run.current_step == 10
    assert run.last_step_at == T0  # no new step: the step clock does not move
    assert run.seconds_per_step is None


def test_an_out_of_order_batch_through_ingest(db: Session) -> None:
    run = db.get(Run, 1)
    ingest(db, run, [(9, {"reward": 0.9})])
    ingest(db, run, [(3, {"reward": 0.3}), (5, {"reward": 0.5})])
    assert run.current_step == 9


def test_seconds_per_step_is_measured_then_smoothed() -> None:
    run = make_run(current_step=10, last_step_at=T0)
    _update_progress(run, 20, T0 + timedelta(seconds=50))  # 5 s per step
    assert run.seconds_per_step == pytest.approx(5.0)
    assert run.current_step == 20 and run.last_step_at == T0 + timedelta(seconds=50)
    _update_progress(run, 30, T0 + timedelta(seconds=150))  # 10 s per step, smoothed 70/30
    assert run.seconds_per_step == pytest.approx(0.7 * 5.0 + 0.3 * 10.0)


def test_the_first_step_has_no_timing_yet() -> None:
    run = make_run(current_step=0, last_step_at=None)
    _update_progress(run, 1, T0)
    assert run.seconds_per_step is None
    assert run.current_step == 1 and run.last_step_at == T0


def test_a_naive_timestamp_from_sqlite_is_read_as_utc() -> None:
    run = make_run(current_step=1, last_step_at=T0.replace(tzinfo=None))
    _update_progress(run, 3, T0 + timedelta(seconds=8))
    assert run.seconds_per_step == pytest.approx(4.0)


def test_the_same_step_again_keeps_the_timing() -> None:
    run = make_run(current_step=5, last_step_at=T0, seconds_per_step=2.0)
    _update_progress(run, 5, T0 + timedelta(seconds=100))
    assert run.seconds_per_step == 2.0 and run.last_step_at == T0 and run.current_step == 5


# --- heartbeats -----------------------------------------------------------------------------

def test_an_empty_heartbeat_refreshes_the_last_report_time() -> None:
    old = datetime.now(UTC) - timedelta(hours=2)
    run = make_run(current_step=7, last_step_at=old, last_report_at=old)
    before = datetime.now(UTC)
    assert ingest(None, run, []) == 0  # type: ignore[arg-type]  # no rows: no database work
    assert run.last_report_at >= before
    assert run.current_step == 7 and run.last_step_at == old  # a heartbeat is not a step


def test_heartbeats_keep_a_quiet_run_from_being_flagged_lost() -> None:
    """A run whose step takes longer than the lost threshold, but whose worker still sends
    heartbeats, is not lost; without the heartbeat the same run is."""
    old = datetime.now(UTC) - timedelta(minutes=30)
    rows = [(s, {"reward": 0.1 * s, "loss": 0.0}) for s in range(1, 11)]
    silent = make_run(current_step=10, last_step_at=old, last_report_at=old, seconds_per_step=1.0)
    assert "lost" in {f.category for f in diagnose(rows, context_for(silent)).findings}
    beating = make_run(current_step=10, last_step_at=old, last_report_at=old, seconds_per_step=1.0)
    ingest(None, beating, [])  # type: ignore[arg-type]
    assert "lost" not in {f.category for f in diagnose(rows, context_for(beating)).findings}
