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
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import app.models  # noqa: F401  (every table on the metadata)
from app.core.db import Base
from app.diagnostics import diagnose
from app.health.service import context_for
from app.metrics import inbox, rollups
from app.metrics.ingest import _update_progress, ingest, store
from app.runs.models import Run
from tests.settled import stored_points

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
    return stored_points(db)


# --- points: stored one row per step, spread into per-metric points ----------------------------

def _store(db: Session, rows: list[tuple[int, dict[str, float]]]) -> None:
    """What ingest then a reader do: one inbox row per step, then ``settle`` spreads them."""
    run = db.get(Run, 1)
    assert run is not None
    store(db, run, rows)
    rollups.settle(db, run)
    db.commit()


def test_later_row_for_the_same_step_and_name_wins(db: Session) -> None:
    run = db.get(Run, 1)
    assert store(db, run, [(1, {"reward": 0.1, "kl": 0.5}), (1, {"reward": 0.9}),
                           (2, {"reward": 0.2})]) == 3
    rollups.settle(db, run)
    db.commit()
    assert stored(db) == {(1, "reward"): (0.9, None), (1, "kl"): (0.5, None),
                          (2, "reward"): (0.2, None)}


def test_non_finite_values_are_kept_as_their_text(db: Session) -> None:
    assert inbox.storable({"a": math.nan, "b": math.inf, "c": -math.inf, "d": 0.0}) == {
        "a": "nan", "b": "inf", "c": "-inf", "d": 0.0}
    _store(db, [(3, {"a": math.nan, "b": math.inf, "c": -math.inf, "d": 0.0, "e": 1e308})])
    points = {name: value for (_, name), value in stored(db).items()}
    assert points == {"a": (None, "nan"), "b": (None, "inf"), "c": (None, "-inf"),
                      "d": (0.0, None), "e": (1e308, None)}


def test_finite_values_that_overflow_a_sum_are_kept_as_numbers(db: Session) -> None:
    _store(db, [(1, {"a": 1.7e308, "b": 1.7e308})])  # their sum is inf: the slow path checks
    assert {n: v for (_, n), v in stored(db).items()} == {"a": (1.7e308, None),
                                                          "b": (1.7e308, None)}


def test_long_names_are_cut_to_the_column_size(db: Session) -> None:
    _store(db, [(1, {"x" * 250: 1.0})])
    assert list(stored(db)) == [(1, "x" * 200)]


def test_a_resent_step_overwrites_instead_of_duplicating(db: Session) -> None:
    _store(db, [(1, {"reward": 0.1, "loss": math.nan})])
    _store(db, [(1, {"reward": 0.7, "loss": 2.0}), (2, {"reward": 0.2})])
    assert stored(db) == {(1, "reward"): (0.7, None), (1, "loss"): (2.0, None),
                          (2, "reward"): (0.2, None)}
    _store(db, [(1, {"loss": math.inf})])
    assert stored(db)[(1, "loss")] == (None, "inf")


def test_a_step_resent_before_it_was_spread_keeps_its_other_values(db: Session) -> None:
    run = db.get(Run, 1)
    store(db, run, [(1, {"reward": 0.1, "loss": 0.5})])
    store(db, run, [(1, {"reward": 0.7, "kl": math.nan})])  # merged into the waiting row
    rollups.settle(db, run)
    db.commit()
    assert stored(db) == {(1, "reward"): (0.7, None), (1, "loss"): (0.5, None),
                          (1, "kl"): (None, "nan")}


def test_upsert_on_pg_overwrites(pg_database: str) -> None:
    """PostgreSQL takes its own dialect's statements (named without "postgresql" so that
    `make mutation`, which runs SQLite only, still runs it)."""
    engine = create_engine(pg_database)
    Base.metadata.create_all(engine)
    try:
        with Session(engine) as session:
            session.add(make_run())
            session.commit()
            run = session.get(Run, 1)
            store(session, run, [(1, {"reward": 0.1, "loss": 0.5})])
            rollups.settle(session, run)
            store(session, run, [(1, {"reward": 0.6, "kl": math.nan})])
            store(session, run, [(1, {"kl": -math.inf}), (2, {"x" * 250: 1e-300})])
            rollups.settle(session, run)
            session.commit()
            assert stored(session) == {(1, "reward"): (0.6, None), (1, "loss"): (0.5, None),
                                       (1, "kl"): (None, "-inf"), (2, "x" * 200): (1e-300, None)}
    finally:
        engine.dispose()


def test_ingest_counts_points_and_moves_the_step(db: Session) -> None:
    run = db.get(Run, 1)
    assert ingest(db, run, [(1, {"reward": 0.1, "loss": 0.0}), (2, {"reward": 0.2})]) == 3
    db.commit()
    assert run.current_step == 2 and run.last_step_at is not None
    assert stored(db) == {}  # as received: one inbox row per step, until a reader settles it
    rollups.settle(db, run)
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
