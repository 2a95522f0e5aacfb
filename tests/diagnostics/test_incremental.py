"""Incremental updates: same answer as one-shot, JSON round-trips, idempotent re-sends."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.diagnostics import DiagnosticsState, RunContext, diagnose


def scenarios(b):
    steps, c = b.healthy_cols(600, 1)
    t = steps / 600
    hack = dict(c)
    hack["rewards/format/mean"] = 0.1 + 0.85 * t + b.rng(1).normal(0, 0.04, len(steps))
    hack["rewards/accuracy/mean"] = 0.6 - 0.4 * t + b.rng(2).normal(0, 0.05, len(steps))
    hack["reward"] = hack["rewards/format/mean"] + hack["rewards/accuracy/mean"]
    spikes = dict(c)
    kl = c["kl"].copy()
    kl[[100, 250, 400, 520]] = 90.0
    spikes["kl"] = kl
    blow = dict(c)
    blow["kl"] = 0.01 * np.exp(7 * t)
    stall = dict(c)
    stall["reward"] = 0.5 + b.rng(3).normal(0, 0.2, len(steps))
    stall["completions/clipped_ratio"] = np.full(len(steps), 0.8)
    return {"healthy": b.rows_from(steps, **c), "hack": b.rows_from(steps, **hack),
            "spikes": b.rows_from(steps, **spikes), "blowup": b.rows_from(steps, **blow),
            "stalled": b.rows_from(steps, **stall)}


@pytest.mark.parametrize("name", ["healthy", "hack", "spikes", "blowup", "stalled"])
@pytest.mark.parametrize("batch", [1, 7, 10, 64])
def test_batches_match_one_shot(b, name, batch):
    rows = scenarios(b)[name]
    one = diagnose(rows)
    st = DiagnosticsState.new(RunContext())
    for i in range(0, len(rows), batch):
        inc = st.update(rows[i:i + batch])
    assert inc.verdict == one.verdict
    assert inc.categories == one.categories


def test_json_round_trip_mid_run(b):
    rows = scenarios(b)["hack"]
    a = DiagnosticsState.new(RunContext(max_completion_length=512))
    a.update(rows[:250])
    blob = json.dumps(a.to_json(), allow_nan=False)  # Postgres JSON rejects NaN
    restored = DiagnosticsState.from_json(json.loads(blob))
    for i in range(250, len(rows), 10):
        da = a.update(rows[i:i + 10])
        dr = restored.update(rows[i:i + 10])
    assert da.to_dict() == dr.to_dict()
    assert restored.context.max_completion_length == 512


def test_state_with_nan_values_is_strict_json(b):
    rows = b.healthy_rows(50, 1)
    rows[10][1]["loss"] = float("nan")
    st = DiagnosticsState.new()
    d = st.update(rows)
    assert d.verdict == "critical"
    json.dumps(st.to_json(), allow_nan=False)
    json.dumps(d.to_dict(), allow_nan=False)


def test_resent_rows_are_ignored(b):
    rows = b.healthy_rows(300, 1)
    st = DiagnosticsState.new()
    st.update(rows[:200])
    before = json.dumps(st.to_json()["metrics"], sort_keys=True)
    st.update(rows[150:200])
    assert json.dumps(st.to_json()["metrics"], sort_keys=True) == before
    d = st.update(rows[150:])
    assert d.to_dict() == diagnose(rows).to_dict()


def test_eval_row_arriving_after_train_row_at_same_step(b):
    rows = b.healthy_rows(100, 1)
    st = DiagnosticsState.new()
    st.update(rows[:20])
    st.update([(20, {"eval_reward": 0.5})])
    assert st.metrics["eval_reward"].n_rows == 1


def test_state_stays_bounded(b):
    steps = np.arange(1, 20001)
    rng = b.rng(0)
    rows = b.rows_from(steps, reward=rng.normal(0.5, 0.1, len(steps)),
                       kl=np.abs(rng.normal(0.05, 0.01, len(steps))))
    st = DiagnosticsState.new()
    for i in range(0, len(rows), 500):
        st.update(rows[i:i + 500])
    assert all(len(h.cnt) <= 128 for h in st.metrics.values())
    assert len(json.dumps(st.to_json())) < 200_000


def test_first_step_persists_while_present(b):
    rows = scenarios(b)["stalled"]
    st = DiagnosticsState.new(RunContext(is_live=True))
    firsts = []
    for i in range(0, len(rows), 50):
        d = st.update(rows[i:i + 50])
        firsts += [f.first_step for f in d.findings if f.category == "stalled"]
    assert firsts and firsts == sorted(firsts, reverse=True)  # never moves later


def test_lost_rechecked_without_new_rows(b):
    rows = b.healthy_rows(50, 1)
    st = DiagnosticsState.new(RunContext(is_live=True, now=100.0, last_report_at=100.0,
                                         seconds_per_step=1.0))
    assert st.update(rows).verdict == "healthy"
    d = st.update([], RunContext(is_live=True, now=100.0 + 7200, last_report_at=100.0,
                                 seconds_per_step=1.0))
    assert "lost" in d.categories
