"""DiagnosticsState and the data model around it: which keys are tracked, how batches become
columns, the component bound, a failing detector, persistence, and the renderings."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest

from app.diagnostics import Diagnosis, DiagnosticsState, Finding, RunContext, diagnose, state
from app.diagnostics.history import MetricHistory
from app.diagnostics.model import json_safe, severity_rank
from app.diagnostics.report import format_text, to_json_dict
from app.diagnostics.view import Series, View


@pytest.fixture(autouse=True)
def fresh_name_cache():
    """_tracked caches per key: start each test without what earlier tests put there."""
    state._tracked_cache.clear()
    yield
    state._tracked_cache.clear()


@pytest.mark.parametrize("key,name", [
    ("reward", "reward"), ("kl", "kl"), ("completion_length", "completions/mean_length"),
    ("rewards/acc", "rewards/acc/mean"), ("rewards/acc/mean", "rewards/acc/mean"),
    ("eval_rewards/acc", None), ("eval_reward", "eval_reward"),  # no detector reads eval parts
    ("rollouts/repetition", "rollouts/repetition"), ("step_time", "step_time"),
    ("rewards/acc/std", None), ("learning_rate", None), ("epoch", None),
    ("eval_loss", None), ("eval_rewards/acc/std", None),
])
def test_tracked_names(key: str, name: str | None) -> None:
    assert state._tracked(key) == name
    assert state._tracked(key) == name  # and again from the cache


def test_plan_prefers_the_new_spelling() -> None:
    plan = state._plan(("completion_length", "completions/mean_length", "kl", "epoch", 3))
    assert plan == (("completions/mean_length", "completions/mean_length"), ("kl", "kl"))
    assert state._plan(("completion_length",)) == (("completion_length",
                                                    "completions/mean_length"),)


def test_values_fast_and_slow_paths() -> None:
    v, ok = state._values([1, 2.5, 3])
    assert v.tolist() == [1.0, 2.5, 3.0] and ok.tolist() == [True, True, True]
    v, ok = state._values(["0.5", "nan", "text", None, True, 2])
    assert ok.tolist() == [True, True, False, False, False, True]
    assert v[0] == 0.5 and math.isnan(v[1]) and v[2] == 0.0 and v[5] == 2.0


def test_columns_segments_sort_and_keep_the_last_value_of_a_step() -> None:
    rows = [(1, {"reward": 0.1}), (2, {"reward": 0.2, "kl": 0.02}),
            (2, {"reward": 0.25, "kl": 0.03}), (3, {"reward": "x"}), (4, {"reward": 0.4})]
    cols = state._columns(rows)
    assert set(cols) == {"reward", "kl"}
    assert cols["reward"][0].tolist() == [1, 2, 4]
    assert cols["reward"][1].tolist() == [0.1, 0.25, 0.4]
    assert cols["kl"][0].tolist() == [2] and cols["kl"][1].tolist() == [0.03]
    one = state._columns([(5, {"kl": 1.0}), (6, {"kl": 2.0})])
    assert one["kl"][0].tolist() == [5, 6] and one["kl"][1].tolist() == [1.0, 2.0]
    assert state._columns([]) == {}


def test_reward_components_are_bounded_per_prefix() -> None:
    row = {f"rewards/f{i:02d}/mean": 0.5 for i in range(20)}
    row |= {f"eval_rewards/f{i:02d}/mean": 0.5 for i in range(3)}
    st = DiagnosticsState.new()
    st.update([(1, {**row, "reward": 1.0})])
    train = [n for n in st.metrics if n.startswith("rewards/")]
    assert len(train) == state.MAX_COMPONENTS and "rewards/f15/mean" in train
    assert "rewards/f16/mean" not in train
    assert [n for n in st.metrics if n.startswith("eval_rewards/")] == []  # nobody reads them
    assert "reward" in st.metrics


def test_a_failing_detector_is_logged_and_the_others_still_run(monkeypatch, caplog) -> None:
    def broken(view: View) -> list[Finding]:
        raise RuntimeError("bug")

    def fine(view: View) -> list[Finding]:
        return [Finding("stalled", "warning", 1, 2, "s")]

    monkeypatch.setattr(state, "DETECTORS", [broken, fine])
    with caplog.at_level(logging.ERROR, logger="app.diagnostics.state"):
        d = diagnose([(1, {"reward": 1.0})])
    assert [f.category for f in d.findings] == ["stalled", "internal_error"]
    assert d.verdict == "warning"
    assert "diagnostics detector broken failed on run None at step 1" in caplog.text
    assert "bug" in caplog.text


def test_first_step_is_kept_while_a_finding_stays(monkeypatch) -> None:
    first = {"step": 10}

    def moving(view: View) -> list[Finding]:
        return [Finding("kl_spike", "warning", first["step"], view.last_step, "k", metric="kl")]

    monkeypatch.setattr(state, "DETECTORS", [moving])
    st = DiagnosticsState.new(RunContext(is_live=True))
    st.update([(1, {"kl": 0.1})])
    first["step"] = 30
    assert st.update([(2, {"kl": 0.1})]).findings[0].first_step == 10
    assert st.first_seen == {"kl_spike|kl": 10}
    monkeypatch.setattr(state, "DETECTORS", [])
    st.update([(3, {"kl": 0.1})])
    assert st.first_seen == {}  # gone: a later return starts afresh
    monkeypatch.setattr(state, "DETECTORS", [moving])
    assert st.update([(4, {"kl": 0.1})]).findings[0].first_step == 30
    first["step"] = 50  # once the run is over, the detectors' own onset stands (issue 31)
    assert st.update([(5, {"kl": 0.1})], RunContext(is_live=False)).findings[0].first_step == 50


def test_stalled_is_dropped_only_next_to_a_too_easy_zero_spread() -> None:
    stalled = Finding("stalled", "warning", 1, 9, "s")
    easy = Finding("zero_reward_spread", "warning", 1, 9, "z", evidence={"kind": "too_easy"})
    hard = Finding("zero_reward_spread", "critical", 1, 9, "z", evidence={"kind": "too_hard"})
    assert state._suppress_redundant([stalled, easy]) == [easy]
    assert state._suppress_redundant([stalled, hard]) == [stalled, hard]
    assert state._suppress_redundant([stalled]) == [stalled]


def test_state_round_trips_and_refuses_other_versions() -> None:
    ctx = RunContext(max_completion_length=64, beta=0.04, num_generations=4, is_live=True,
                     now=5.0, last_report_at=4.0, seconds_per_step=1.5)
    st = DiagnosticsState.new(ctx)
    st.update([(s, {"reward": 0.1 * s, "loss": math.nan if s == 3 else 0.0}) for s in range(1, 9)])
    blob = json.loads(json.dumps(st.to_json(), allow_nan=False))
    assert blob["version"] == state.STATE_VERSION
    back = DiagnosticsState.from_json(blob)
    assert back.context == ctx and back.first_seen == st.first_seen
    assert back.diagnosis.to_dict() == st.diagnosis.to_dict()
    assert set(back.metrics) == set(st.metrics)
    assert back.update([]).to_dict() == st.update([]).to_dict()
    with pytest.raises(ValueError, match="unsupported diagnostics state version 0"):
        DiagnosticsState.from_json({**blob, "version": 0})
    with pytest.raises(ValueError, match="version None"):
        DiagnosticsState.from_json({})
    bare = DiagnosticsState.from_json({"version": state.STATE_VERSION})
    assert bare.metrics == {} and bare.diagnosis.verdict == "healthy"
    assert bare.context == RunContext()


def test_a_new_context_replaces_the_old_one() -> None:
    st = DiagnosticsState.new(RunContext(beta=0.1))
    st.update([], RunContext(beta=0.2))
    assert st.context.beta == 0.2
    st.update([])
    assert st.context.beta == 0.2


# ---- model ---------------------------------------------------------------------------------

def test_json_safe() -> None:
    assert json_safe({"a": [math.nan, (math.inf, -math.inf)], 1: np.float64(2.5),
                      "n": np.int64(3), "s": "x", "b": True, "f": 0.5}) == {
        "a": ["nan", ["inf", "-inf"]], "1": 2.5, "n": 3, "s": "x", "b": True, "f": 0.5}
    assert json_safe(np.float64("nan")) == "nan"


def test_findings_validate_severity_and_steps() -> None:
    with pytest.raises(ValueError, match="unknown severity 'bad'"):
        Finding("x", "bad", 1, 2, "s")
    f = Finding("kl_spike", "info", np.int64(3), 4.0, "s", metric="kl")  # type: ignore[arg-type]
    assert (f.first_step, f.last_step) == (3, 4) and type(f.first_step) is int
    assert f.key == ("kl_spike", "kl")
    assert Finding.from_dict({**f.to_dict(), "extra": 1}) == f
    assert [severity_rank(s) for s in ("info", "warning", "critical")] == [0, 1, 2]


def test_diagnosis_orders_by_severity_then_step_then_category() -> None:
    fs = [Finding("b", "warning", 5, 5, "s"), Finding("a", "warning", 5, 5, "s"),
          Finding("c", "info", 1, 1, "s"), Finding("d", "critical", 9, 9, "s"),
          Finding("e", "warning", 2, 2, "s")]
    d = Diagnosis.from_findings(fs)
    assert [f.category for f in d.findings] == ["d", "e", "a", "b", "c"]
    assert d.verdict == "critical" and d.categories == ["a", "b", "c", "d", "e"]
    assert Diagnosis.from_findings([]).verdict == "healthy"
    assert Diagnosis.from_findings(fs[:2]).verdict == "warning"
    assert Diagnosis.from_findings(fs[2:3]).verdict == "healthy"


def test_run_context_from_dict() -> None:
    assert RunContext.from_dict(None) == RunContext()
    assert RunContext.from_dict({"beta": 0.1, "unknown": 2}) == RunContext(beta=0.1)
    assert RunContext(now=1.0).to_dict()["now"] == 1.0


def test_format_text_exactly() -> None:
    d = Diagnosis.from_findings([
        Finding("kl_spike", "warning", 3, 7, "KL jumped.", evidence={"peak": math.inf},
                actions=["Lower beta"], metric="kl"),
        Finding("lost", "critical", 9, 9, "Silent.")])
    lines = ["Verdict: CRITICAL (2 findings)", "",
             "[!!] CRITICAL lost (step 9)", "    Silent.", "",
             "[!] WARNING kl_spike (steps 3-7) on kl", "    KL jumped.",
             '    evidence: {"peak": "inf"}', "    - Lower beta"]
    assert format_text(d).split("\n") == lines
    one = Diagnosis.from_findings([Finding("dead_reward_component", "info", 1, 1, "Dead.")])
    assert format_text(one) == ("Verdict: HEALTHY (1 finding)\n\n"
                                "[i] INFO dead_reward_component (step 1)\n    Dead.")
    assert format_text(Diagnosis.from_findings([])) == "Verdict: HEALTHY (0 findings)"
    assert to_json_dict(d) == d.to_dict()


# ---- view ----------------------------------------------------------------------------------

def test_series_and_view() -> None:
    s = Series(np.array([2.0, 4.0, 6.6]), np.array([1.0, 2.0, 3.0]))
    assert (len(s), s.span, s.first, s.last) == (3, pytest.approx(4.6), 2, 7)
    part = s.between(4.0, 6.6)
    assert part.steps.tolist() == [4.0, 6.6] and part.values.tolist() == [2.0, 3.0]
    assert Series(np.zeros(0), np.zeros(0)).span == 0.0
    h = MetricHistory()
    h.add("reward", np.array([3, 4]), np.array([1.0, 2.0]))
    empty = MetricHistory()
    empty.add("kl", np.array([9]), np.array([math.nan]))
    view = View({"reward": h, "kl": empty, "rewards/b/mean": h, "rewards/a/mean": h,
                 "rewards/a/std": h, "eval_rewards/a/mean": h}, RunContext())
    assert view.series("kl") is None and view.series("missing") is None
    assert view.series("reward").values.tolist() == [1.0, 2.0]
    assert view.series("reward") is view.series("reward")  # cached
    assert view.components() == ["rewards/a/mean", "rewards/b/mean"]
    assert view.components(eval_=True) == ["eval_rewards/a/mean"]
    assert (view.first_step, view.last_step) == (3, 9)
    assert (View({}, RunContext()).first_step, View({}, RunContext()).last_step) == (0, 0)
    assert view.hist("reward") is h and view.hist("nope") is None
