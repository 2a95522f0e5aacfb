"""The diagnostics state lives in its own table, and a live run's detectors run at a bounded rate
(issue 12): batches between two evaluations are kept, not lost, and the next evaluation (here
the run's end) sees them all."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect, select

from app.core import config
from app.core.db import get_engine, get_sessionmaker
from app.health.models import DiagnosticsRecord
from app.ingest import pipeline
from app.runs.service import get_run_for_update
from grpodeck.contract.wire import MetricRow
from tests.app.conftest import running_run


def _rows(first: int, last: int, *, collapsed: bool) -> list[MetricRow]:
    return [MetricRow(step=s, metrics={"reward": 0.5, "reward_std": 0.2, "loss": 0.1,
                                       "entropy": 0.01 if collapsed else 1.5})
            for s in range(first, last + 1)]


def _feed(run_id: int, rows: list[MetricRow]) -> None:
    with get_sessionmaker()() as db:
        run = get_run_for_update(db, run_id)
        assert run is not None
        pipeline.receive(db, run, pipeline.normalized(rows))
        db.commit()


def _categories(client: TestClient, run_id: int) -> set[str]:
    return {f["category"] for f in client.get(f"/api/runs/{run_id}/findings").json()["findings"]}


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def apply(**values: str) -> None:
        for key, value in values.items():
            monkeypatch.setenv(f"GRPODECK_{key.upper()}", value)
        config.get_settings.cache_clear()
    yield apply
    config.get_settings.cache_clear()


def test_batches_between_evaluations_wait_for_the_next_one(client: TestClient, settings) -> None:  # type: ignore[no-untyped-def]
    settings(diagnostics_min_interval_seconds="3600")
    run_id, headers = running_run(client)
    _feed(run_id, _rows(1, 40, collapsed=False))  # the first batch is evaluated
    for start in range(41, 200, 20):  # entropy collapses, within the hour: not evaluated yet
        _feed(run_id, _rows(start, start + 19, collapsed=True))
    assert "entropy_collapse" not in _categories(client, run_id)
    reply = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    assert reply.status_code == 200, reply.text
    assert "entropy_collapse" in _categories(client, run_id)  # the end evaluates everything


def test_the_state_is_stored_apart_from_the_run_row(client: TestClient, settings) -> None:  # type: ignore[no-untyped-def]
    settings(diagnostics_persist_seconds="0")
    assert not {"diagnostics_state", "diagnostics_through"} & {
        c["name"] for c in inspect(get_engine()).get_columns("runs")}
    run_id, _ = running_run(client)
    _feed(run_id, _rows(1, 30, collapsed=False))
    _feed(run_id, _rows(31, 45, collapsed=False))
    with get_sessionmaker()() as db:
        record = db.scalars(select(DiagnosticsRecord).where(
            DiagnosticsRecord.run_id == run_id)).one()
        assert record.through == 45
        assert record.state["metrics"]["entropy"]["last_step"] == 45


def test_every_batch_of_a_smoke_runs_first_steps_is_evaluated(client: TestClient, settings) -> None:  # type: ignore[no-untyped-def]
    """Issue 23: under the rate bound, a smoke run's second batch would wait for the run's end;
    its first steps are all evaluated (the state is tiny then), so an exact signal in them is
    found while the run is live."""
    settings(diagnostics_min_interval_seconds="3600")
    run_id, _ = running_run(client)
    _feed(run_id, [MetricRow(step=1, metrics={"reward": 0.5, "reward_std": 0.2, "loss": 0.1})])
    _feed(run_id, [MetricRow(step=s, metrics={"reward": 0.0, "reward_std": 0.0, "loss": 0.0,
                                             "frac_reward_zero_std": 1.0}) for s in (2, 3, 4, 5)])
    assert "zero_reward_spread" in _categories(client, run_id)
