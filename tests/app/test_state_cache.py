"""The live diagnostics state kept between batches (app/health/state_cache.py) must give the
same findings as a state rebuilt from the database: after another web process took a batch,
after a restart, and after a transaction that rolled back."""

from __future__ import annotations

import copy
import math

import pytest
from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.health import state_cache
from app.ingest import pipeline
from app.runs.models import Run
from app.runs.service import get_run_for_update
from grpodeck.contract.wire import MetricRow
from tests.app.conftest import running_run


def _batch(b: int) -> list[MetricRow]:
    """Entropy collapses and KL climbs halfway through: findings open, move and change."""
    rows = []
    for s in range(1 + 5 * b, 6 + 5 * b):
        late = s > 60
        rows.append(MetricRow(step=s, metrics={
            "reward": 0.5 + 0.01 * math.sin(s), "reward_std": 0.0 if late else 0.2,
            "entropy": 0.01 if late else 1.5 + 0.1 * math.sin(s), "kl": s * 0.05 if late else 0.01,
            "loss": 0.1, "grad_norm": float("nan") if s == 77 else 1.0}))
    return rows


def _feed(run_id: int, b: int, *, rollback: bool = False) -> None:
    with get_sessionmaker()() as db:
        run = get_run_for_update(db, run_id)
        assert run is not None
        pipeline.receive(db, run, pipeline.normalized(_batch(b)))
        if rollback:
            db.rollback()
        else:
            db.commit()


def _findings(client: TestClient, run_id: int, *, first_step: bool = True) -> list[tuple]:
    body = client.get(f"/api/runs/{run_id}/findings").json()
    return [body["verdict"]] + sorted(
        (f["category"], f.get("metric"), f["severity"], f["last_step"])
        + ((f["first_step"],) if first_step else ()) for f in body["findings"])


@pytest.mark.parametrize("persist_seconds", ["0", "3600"])
def test_a_rebuilt_state_diagnoses_like_the_cached_one(
        client: TestClient, monkeypatch: pytest.MonkeyPatch, persist_seconds: str) -> None:
    from app.core import config

    monkeypatch.setenv("GRPODECK_DIAGNOSTICS_PERSIST_SECONDS", persist_seconds)
    config.get_settings.cache_clear()
    cached, _ = running_run(client)
    rebuilt, _ = running_run(client)
    for b in range(24):
        _feed(cached, b)
        if b % 5 == 2:  # a batch that fails after diagnostics ran: its update must not stick
            _feed(rebuilt, b, rollback=True)
        if b % 3 == 1:  # a restart: this process has no entry for the run
            state_cache.forget(rebuilt)
        stale = state_cache._entries.get(rebuilt) if b % 4 == 3 else None
        if stale is not None:  # another process takes this batch; ours keeps its old entry
            state_cache._entries[rebuilt] = state_cache._Entry(
                stale.revision, copy.deepcopy(stale.state), stale.through, stale.persisted_at)
            state_cache.forget(rebuilt)
        _feed(rebuilt, b)
        if stale is not None:
            state_cache._entries[rebuilt] = stale
        # Written back every batch, a rebuild is exact. Written back lazily, a rebuild replays a
        # few batches in one go, and a finding may date its start a step or two differently.
        exact = persist_seconds == "0"
        assert (_findings(client, rebuilt, first_step=exact)
                == _findings(client, cached, first_step=exact)), b
    assert {f[0] for f in _findings(client, cached)[1:]} >= {"entropy_collapse"}
    with get_sessionmaker()() as db:
        runs = [db.get(Run, cached), db.get(Run, rebuilt)]
        assert all(r is not None and r.diagnostics_revision >= 24 for r in runs)
