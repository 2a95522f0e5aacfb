"""A failing detector never removes other findings; spike summaries survive a history whose
isolated spikes were all evicted; every detector reads only what it declares."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from app.diagnostics import DiagnosticsState, diagnose, state
from app.diagnostics.detector import Detector, UndeclaredMetric
from app.diagnostics.detectors import DETECTORS
from app.diagnostics.history import MAX_EPISODES
from app.diagnostics.view import View


def spikes_then_bursts(metric: str, base: float) -> list[tuple[int, dict]]:
    """20 isolated spikes, then more than MAX_EPISODES short bursts (3 elevated rows each):
    the bounded history evicts every isolated episode and keeps only bursts."""
    rng = np.random.default_rng(0)
    values = [base] * 10
    for _ in range(20):
        values += list(base * (1 + 0.01 * rng.normal(size=10))) + [base * 100]
    for _ in range(MAX_EPISODES + 6):
        values += list(base * (1 + 0.01 * rng.normal(size=10))) + [base * 100] * 3
    return [(i + 1, {metric: float(v), "reward": 0.5}) for i, v in enumerate(values)]


def test_kl_spikes_are_reported_when_only_bursts_remain_in_the_history() -> None:
    st = DiagnosticsState.new()
    d = st.update(spikes_then_bursts("kl", 0.05))
    h = st.metrics["kl"]
    assert h.n_isolated_closed == 20 and all(e[2] > 2 for e in h.episodes)  # the shape
    (f,) = [f for f in d.findings if f.category == "kl_spike"]
    assert f.severity == "warning" and f.evidence["spike_count"] == 20
    assert f.evidence["largest_spikes"] == [] and "older than the kept history" in f.summary
    assert "internal_error" not in d.categories


def test_grad_norm_spikes_share_the_same_summary() -> None:
    d = diagnose(spikes_then_bursts("grad_norm", 0.5))
    (f,) = [f for f in d.findings if f.category == "numerical_instability"]
    assert f.evidence["spike_count"] == 20 and f.metric == "grad_norm"
    assert "internal_error" not in d.categories


def kl_blowup_with_spikes() -> list[tuple[int, dict]]:
    steps = np.arange(1, 301)
    kl_ = 0.01 + 0.01 * np.exp(steps / 40)
    kl_[[30, 60, 90]] = 50.0  # isolated spikes early, while KL is still small
    return [(int(s), {"kl": float(k), "reward": 0.5}) for s, k in zip(steps, kl_, strict=True)]


def test_a_raising_detector_keeps_the_others_findings_and_leaves_a_note(monkeypatch,
                                                                         caplog) -> None:
    def broken(view: View) -> list:
        raise ZeroDivisionError("planted")

    raising = Detector("kl_spikes", ("kl",), broken)
    dets = tuple(raising if d.name == "kl_spikes" else d for d in DETECTORS)
    monkeypatch.setattr(state, "DETECTORS", dets)
    before = state.detector_failures().get("kl_spikes", 0)
    st = DiagnosticsState.new(state.RunContext(run_id=42))
    with caplog.at_level(logging.ERROR, logger="app.diagnostics.state"):
        d = st.update(kl_blowup_with_spikes())
    assert "kl_blowup" in d.categories  # same module, separate detector: still reported
    (note,) = [f for f in d.findings if f.category == "internal_error"]
    assert note.severity == "info" and note.metric == "detector/kl_spikes"
    assert note.evidence == {"detector": "kl_spikes", "error": "ZeroDivisionError: planted"}
    assert state.detector_failures()["kl_spikes"] == before + 1
    assert "detector kl_spikes failed on run 42 at step 300" in caplog.text
    assert "planted" in caplog.text
    assert st.to_json()["diagnosis"]["findings"]  # the note round-trips with the state


def test_the_unbroken_run_has_both_kl_findings_and_no_note() -> None:
    d = diagnose(kl_blowup_with_spikes())
    assert {"kl_blowup", "kl_spike"} <= set(d.categories)
    assert "internal_error" not in d.categories


def test_tracked_metrics_come_from_the_declarations() -> None:
    exact, patterns = state.tracked_reads()
    assert exact == {r for d in DETECTORS for r in d.reads if "*" not in r}
    assert patterns == ("rewards/*/mean", "system/gpu*/mem_reserved_bytes",
                        "system/gpu*/mem_total_bytes")
    assert (state.TRACKED, state.TRACKED_PATTERNS) == (exact, patterns)  # what the state keeps
    assert state._tracked("completions/clipped_ratio") and not state._tracked("clip_ratio/low_mean")
    new = Detector("probe", ("completions/mean_terminated_length", "eval_rewards/*/mean"),
                   lambda v: [])
    exact2, patterns2 = state.tracked_reads(DETECTORS + (new,))
    assert "completions/mean_terminated_length" in exact2 - exact
    assert patterns2 == ("eval_rewards/*/mean", *patterns)


def test_a_scoped_view_refuses_an_undeclared_metric() -> None:
    st = DiagnosticsState.new()
    st.update([(i, {"kl": 0.1, "reward": 0.5}) for i in range(1, 10)])
    view = View(st.metrics, st.context).scoped(Detector("kl_only", ("kl",), lambda v: []))
    assert view.series("kl") is not None
    with pytest.raises(UndeclaredMetric):
        view.series("reward")
    with pytest.raises(UndeclaredMetric):
        view.hist("reward")


@pytest.mark.parametrize("det", DETECTORS, ids=lambda d: d.name)
def test_every_detector_reads_only_what_it_declares(det: Detector) -> None:
    """Every metric any detector reads is present, so each detector walks its full path."""
    from tests.diagnostics.reference_runs import RUNS

    for make in RUNS.values():
        rows, ctx = make()
        st = DiagnosticsState.new(ctx)
        st.update(rows)
        det(View(st.metrics, st.context).scoped(det))  # raises UndeclaredMetric if not
