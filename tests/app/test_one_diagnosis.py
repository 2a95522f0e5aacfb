"""One truth on every path (issue 31): the findings stored for a run equal what the detectors say
over its whole stored history (``grpodeck diagnose`` of the same rows), however the rows arrived:
one per request or batches of any size, re-sent and out-of-order batches, the inbox settled at
any point, the web process restarted between batches (its in-memory diagnostics state lost), a
detector rate bound on or off, an import of the same rows, and an MLflow client whose steps
arrive value by value or cut across requests.

The generated run has a peak, a collapse from it, an entropy collapse and a KL rise, so the
comparison covers onsets and key numbers of several critical findings, not only "healthy"."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from app.core import config as config_module
from app.core.db import get_sessionmaker
from app.diagnostics import diagnose
from app.health import state_cache
from app.health.service import context_for, findings_for
from app.runs.models import Run
from tests.app.conftest import running_run

Row = tuple[int, dict[str, float]]


def collapsing_run(n: int, peak: float, seed: int) -> list[Row]:
    """Reward rising to ~0.8 at ``peak`` (a share of the run) and falling back; entropy
    collapsing and KL growing from just before the peak; noise from ``seed``."""
    rng = np.random.default_rng(seed)
    top = max(2, int(n * peak))
    rows: list[Row] = []
    for s in range(1, n + 1):
        reward = 0.1 + 0.7 * s / top if s <= top else 0.8 - 0.6 * min(1.0, (s - top) / top)
        late = max(0, s - int(top * 0.9))
        entropy = max(0.02, 1.2 * math.exp(-late / max(1, n / 12)))
        kl = 0.02 + 0.004 * late * 1000 / n
        rows.append((s, {"reward": reward + rng.normal(0, 0.05),
                         "reward_std": 0.2 + abs(rng.normal(0, 0.02)),
                         "entropy": entropy * (1 + rng.normal(0, 0.03)),
                         "kl": kl * (1 + rng.normal(0, 0.05)), "loss": 0.01}))
    return rows


def _post(client: TestClient, run_id: int, headers: dict[str, str], rows: list[Row]) -> None:
    body = {"rows": [{"step": s, "metrics": m} for s, m in rows]}
    reply = client.post(f"/api/runs/{run_id}/metrics", content=json.dumps(body),
                        headers={**headers, "Content-Type": "application/json"})
    assert reply.status_code == 200, reply.text


def _numbers(evidence: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in evidence.items()
            if isinstance(v, int | float) and not isinstance(v, bool)}


def assert_same_findings(run_id: int, rows: list[Row]) -> None:
    """Stored active findings == a one-shot diagnosis of the rows, under the run's context."""
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None
        expected = diagnose(rows, context_for(run)).findings
        stored = findings_for(db, run_id, active_only=True)
        got = {(f.category, f.metric_key): f for f in stored}
        want = {(f.category, f.metric or ""): f for f in expected}
        assert sorted(got) == sorted(want)
        for key, f in want.items():
            record = got[key]
            assert (record.severity, record.first_step, record.last_step) == (
                f.severity, f.first_step, f.last_step), key
            wanted = _numbers(f.to_dict()["evidence"])
            assert _numbers(record.evidence) == pytest.approx(wanted, rel=1e-6, abs=1e-9), key


@st.composite
def deliveries(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(60, 1500))
    cuts = sorted(set(draw(st.lists(st.integers(1, n - 1), max_size=12))))
    batches = [list(range(a, b)) for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    order = list(range(len(batches)))
    if draw(st.booleans()):  # some batches out of order
        order = draw(st.permutations(order))
    resent = draw(st.lists(st.sampled_from(order), max_size=3))  # re-sent, same values
    events = draw(st.lists(st.sampled_from(["settle", "restart", "none"]),
                           min_size=len(order) + len(resent),
                           max_size=len(order) + len(resent)))
    return {"n": n, "peak": draw(st.floats(0.25, 0.6)), "seed": draw(st.integers(0, 2**16)),
            "plan": [batches[i] for i in [*order, *resent]], "events": events,
            "every_batch": draw(st.booleans())}


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                  HealthCheck.too_slow])
@given(delivery=deliveries())
@example(delivery={  # in order, evaluated every 100 steps: onsets seen early must not stick
    "n": 1500, "peak": 0.4, "seed": 1, "every_batch": True, "events": ["none"] * 15,
    "plan": [list(range(a, a + 100)) for a in range(0, 1500, 100)]})
def test_stored_findings_equal_a_whole_history_diagnosis(
        client: TestClient, monkeypatch: pytest.MonkeyPatch, delivery: dict[str, Any]) -> None:
    monkeypatch.setenv("GRPODECK_DIAGNOSTICS_MIN_INTERVAL_SECONDS",
                       "0" if delivery["every_batch"] else "1000")
    config_module.get_settings.cache_clear()
    note(repr({k: v for k, v in delivery.items() if k != "plan"}))
    note(repr([(b[0] + 1, b[-1] + 1) for b in delivery["plan"] if b]))
    rows = collapsing_run(delivery["n"], delivery["peak"], delivery["seed"])
    run_id, headers = running_run(client, max_steps=delivery["n"])
    for indices, event in zip(delivery["plan"], delivery["events"], strict=True):
        _post(client, run_id, headers, [rows[i] for i in indices])
        if event == "settle":
            assert client.get(f"/api/runs/{run_id}/chart").status_code == 200
        elif event == "restart":  # a new web process: nothing of this run in memory
            state_cache.forget(run_id)
    reply = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    assert reply.status_code == 200, reply.text
    assert_same_findings(run_id, rows)


def test_the_generated_run_has_the_findings_the_comparison_needs() -> None:
    """Guard against a vacuous property: the run collapses in every way it is meant to."""
    found = {f.category for f in diagnose(collapsing_run(1200, 0.4, 7)).findings}
    assert {"reward_collapse", "entropy_collapse", "kl_blowup"} <= found


def test_an_import_of_the_rows_stores_the_whole_history_diagnosis(client: TestClient) -> None:
    rows = collapsing_run(900, 0.4, 3)
    body = "\n".join(json.dumps({"step": s, **m}) for s, m in rows)
    reply = client.post("/api/imports", files={"log": ("run.jsonl", body.encode())},
                        data={"name": "imported"})
    assert reply.status_code == 201, reply.text
    (imported,) = reply.json()["runs"]
    assert_same_findings(int(imported["id"]), rows)


MLFLOW = "/mlflow/api/2.0/mlflow"


@st.composite
def mlflow_deliveries(draw: st.DrawFn) -> dict[str, Any]:
    """How an MLflow client spreads a run's values over requests: ``log_metric`` per value,
    ``log_metrics`` per step, or batches that cut across steps (one step's values in two
    requests); values of neighbouring steps may arrive out of order."""
    return {"n": draw(st.integers(30, 70)), "peak": draw(st.floats(0.25, 0.6)),
            "seed": draw(st.integers(0, 2**16)), "every_batch": draw(st.booleans()),
            "split": draw(st.sampled_from(["per_value", "per_step", "across_steps"])),
            "shuffle": draw(st.booleans())}


def mlflow_requests(rows: list[Row], split: str, shuffle: bool, seed: int
                    ) -> list[list[dict[str, Any]]]:
    """The metric lists of the log-batch requests that carry ``rows``."""
    values = [{"key": k, "value": v, "timestamp": 0, "step": s}
              for s, metrics in rows for k, v in metrics.items()]
    rng = np.random.default_rng(seed)
    if shuffle:  # a window of 12 values (two or three steps) arrives in any order
        for start in range(0, len(values), 12):
            window = values[start:start + 12]
            values[start:start + 12] = [window[i] for i in rng.permutation(len(window))]
    if split == "per_value":
        return [[v] for v in values]
    if split == "per_step":
        by_step: dict[int, list[dict[str, Any]]] = {}
        for v in values:
            by_step.setdefault(v["step"], []).append(v)
        return list(by_step.values())
    cuts = sorted(set(rng.integers(1, len(values), size=len(values) // 7).tolist()))
    return [values[a:b] for a, b in zip([0, *cuts], [*cuts, len(values)], strict=True)]


@settings(max_examples=2, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                 HealthCheck.too_slow])
@given(delivery=mlflow_deliveries())
@example(delivery={"n": 60, "peak": 0.4, "seed": 5, "every_batch": True,
                   "split": "per_value", "shuffle": True})
def test_an_mlflow_client_run_stores_the_whole_history_diagnosis(
        client: TestClient, monkeypatch: pytest.MonkeyPatch, delivery: dict[str, Any]) -> None:
    """The MLflow protocol (TRL's ``report_to="mlflow"``, or ``mlflow.log_metric`` per value):
    a step's values may come in several requests, so the live diagnosis sees steps half
    filled; once the client ends the run, the findings are the whole history's."""
    monkeypatch.setenv("GRPODECK_DIAGNOSTICS_MIN_INTERVAL_SECONDS",
                       "0" if delivery["every_batch"] else "1000")
    config_module.get_settings.cache_clear()
    note(repr(delivery))
    rows = collapsing_run(delivery["n"], delivery["peak"], delivery["seed"])
    created = client.post(f"{MLFLOW}/runs/create", json={"experiment_id": "0"})
    assert created.status_code == 200, created.text
    mlflow_id = created.json()["run"]["info"]["run_id"]
    for metrics in mlflow_requests(rows, delivery["split"], delivery["shuffle"],
                                   delivery["seed"]):
        reply = client.post(f"{MLFLOW}/runs/log-batch",
                            json={"run_id": mlflow_id, "metrics": metrics})
        assert reply.status_code == 200, reply.text
    ended = client.post(f"{MLFLOW}/runs/update",
                        json={"run_id": mlflow_id, "status": "FINISHED"})
    assert ended.status_code == 200, ended.text
    assert_same_findings(int(mlflow_id), rows)
