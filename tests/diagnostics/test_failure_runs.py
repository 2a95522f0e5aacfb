"""The second-round patterns on labelled synthetic runs: component hacking (whatever the total
does, monitor-only objectives, saturated proxies), collapse from the peak, sudden vs benign
length collapse, and the severity rule's combinations and sustained findings."""

from __future__ import annotations

import numpy as np
import pytest

from app.diagnostics import DiagnosticsState, Finding, RunContext, diagnose
from app.diagnostics.severity import apply_severity_rule
from tests.diagnostics.conftest import healthy_cols, healthy_rows, rows_from
from tests.diagnostics.failure_runs import RUNS, Labelled

ONSET_LATE_SHARE = 0.15  # a finding may start up to 15% of the run after the labelled onset
ONSET_EARLY_STEPS = 10  # ... and a little before it (smoothing)


def found(run: Labelled, category: str | None = None) -> Finding:
    d = diagnose(run.rows, run.context)
    hits = [f for f in d.findings if f.category == (category or run.category)]
    assert hits, [(f.category, f.severity) for f in d.findings]
    return hits[0]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_failing_run_is_flagged_with_its_severity_from_its_onset(name: str) -> None:
    run = RUNS[name]()
    f = found(run)
    assert f.severity == run.severity
    late = ONSET_LATE_SHARE * run.last_step
    assert run.onset - ONSET_EARLY_STEPS <= f.first_step <= run.onset + late, f.first_step


@pytest.mark.parametrize("name", ["hack_total_rises", "hack_total_flat",
                                  "hack_saturated_total_falls", "hack_monitor_objective"])
def test_hacking_is_caught_whatever_the_total_does(name: str) -> None:
    run = RUNS[name]()
    f = found(run)
    assert f.evidence["objective"] in f.metric and len(f.evidence["rising"]) == 1


def test_a_monitor_only_reward_is_the_objective() -> None:
    f = found(RUNS["hack_monitor_objective"]())
    assert f.evidence["objective"] == "unit_tests"
    assert f.evidence["objective_is_monitor_only"] is True and "(monitor-only)" in f.summary


def test_a_saturated_format_reward_counts_as_the_proxy() -> None:
    f = found(RUNS["hack_saturated_total_falls"]())
    assert f.evidence["rising"]["format"]["how"] == "sits saturated"
    assert f.metric == "rewards/pass_rate/mean"


def test_a_saturated_format_with_a_noisy_flat_score_is_not_hacking() -> None:
    """The minesweeper shape: the JSON reward saturates, the game score is noise, no trend."""
    steps, c = healthy_cols(500, 10, seed=5)
    r = np.random.default_rng(50)
    k = len(steps)
    c.pop("rewards/format/mean"), c.pop("rewards/accuracy/mean")
    c["rewards/valid_json/mean"] = np.minimum(2.0, 0.5 + steps / 40 + np.abs(r.normal(0, 0.1, k)))
    c["rewards/game_score/mean"] = r.normal(-1.0, 5.0, k)
    c["reward"] = c["rewards/valid_json/mean"] + c["rewards/game_score/mean"]
    assert "reward_hacking" not in diagnose(rows_from(steps, **c)).categories


def test_collapse_from_the_peak_starts_at_the_decline_and_is_not_a_stall() -> None:
    run = RUNS["collapse_from_peak"]()
    d = diagnose(run.rows, run.context)
    f = found(run)
    assert f.evidence["share_of_gain_lost"] >= 0.8 and f.first_step > 100
    assert "stalled" not in d.categories


def test_a_partial_fall_from_the_peak_is_a_warning() -> None:
    steps = np.arange(1, 301)
    r = np.random.default_rng(7).normal(0, 0.03, 300)
    reward = 0.3 + 0.8 * np.clip(steps / 120, 0, 1) - 0.4 * np.clip((steps - 120) / 50, 0, 1) + r
    f = found(Labelled(rows_from(steps, reward=reward), None, 120, "reward_collapse",
                       "warning", 300))
    assert f.severity == "warning" and 0.3 < f.evidence["share_of_gain_lost"] < 0.8


def test_a_sudden_length_collapse_says_so() -> None:
    f = found(RUNS["length_collapse_sudden"]())
    assert f.evidence["sudden"] is True and f.evidence["fall_logging_steps"] <= 5
    assert f.evidence["truncation_disappeared"] is False


def test_truncation_that_disappears_while_reward_rises_is_benign() -> None:
    f = found(RUNS["truncation_disappears"]())
    assert f.severity == "info" and f.evidence["truncation_disappeared"] is True
    assert "learned to finish" in f.summary


def without(run: Labelled, metrics: tuple[str, ...]) -> Labelled:
    rows = [(s, {k: v for k, v in d.items() if k not in metrics}) for s, d in run.rows]
    return Labelled(rows, run.context, run.onset, run.category, run.severity, run.last_step)


@pytest.mark.parametrize("name,drop,category", [
    ("entropy_collapse_zero_spread", ("frac_reward_zero_std",), "entropy_collapse"),
    ("entropy_collapse_zero_spread", ("entropy",), "zero_reward_spread"),
    ("entropy_blowup_at_cap", ("completions/clipped_ratio", "completions/mean_length"),
     "entropy_blowup"),
    ("length_and_entropy_collapse", ("entropy",), "length_collapse"),
])
def test_each_half_of_a_combination_is_only_a_warning(name: str, drop: tuple[str, ...],
                                                      category: str) -> None:
    alone = without(RUNS[name](), drop)
    assert found(alone, category).severity == "warning"
    together = found(RUNS[name](), category)
    assert together.severity == "critical" and "together_with" in together.evidence


def test_a_short_kl_blowup_is_a_warning_a_sustained_one_critical() -> None:
    run = RUNS["kl_sustained"]()
    short = Labelled([(s, d) for s, d in run.rows if s <= 150], None, 100, "kl_blowup",
                     "warning", 150)
    assert found(short).severity == "warning"
    assert found(run).evidence["sustained_steps"] >= 50


def test_info_findings_never_escalate() -> None:
    a = Finding("entropy_collapse", "info", 1, 100, "a")
    b = Finding("zero_reward_spread", "warning", 1, 100, "b")
    assert [f.severity for f in apply_severity_rule([a, b])] == ["info", "warning"]
    a.severity = "warning"
    assert [f.severity for f in apply_severity_rule([a, b])] == ["critical", "critical"]


def test_reward_weights_round_trip_in_the_context() -> None:
    ctx = RunContext(reward_weights={"tests": 0.0}, run_id=7)
    assert RunContext.from_dict(ctx.to_dict()) == ctx


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_healthy_run_fed_live_never_raises_a_warning(seed: int) -> None:
    """Every prefix of a healthy run is judged (as the app does on each batch): no false
    alarm at any step, not only on the whole run."""
    st = DiagnosticsState.new()
    for row in healthy_rows(300, 1, seed):
        d = st.update([row])
        assert d.verdict == "healthy", (row[0], [(f.category, f.severity) for f in d.findings])


def test_the_app_passes_a_launched_runs_reward_weights_and_id() -> None:
    from app.health.service import context_for
    from app.runs.lifecycle import Status
    from app.runs.models import Run

    spec = {"rewards": [{"name": "blocks"}, {"name": "tests", "weight": 0}]}
    ctx = context_for(Run(id=5, name="r", spec=spec, status=Status.RUNNING))
    assert ctx.reward_weights == {"blocks": 1.0, "tests": 0.0} and ctx.run_id == 5
    imported = Run(id=6, name="i", spec={"source": "import"}, status=Status.IMPORTED)
    assert context_for(imported).reward_weights is None


def first_live(run: Labelled, category: str) -> int | None:
    """The step a category is first raised (>= warning) when rows arrive one at a time."""
    st = DiagnosticsState.new(run.context)
    for row in run.rows:
        d = st.update([row])
        if any(f.category == category and f.severity != "info" for f in d.findings):
            return row[0]
    return None


@pytest.mark.parametrize("name,category", [("length_collapse_sudden", "length_collapse"),
                                           ("length_and_entropy_collapse", "entropy_collapse")])
def test_a_sudden_shift_is_flagged_within_a_few_logging_steps(name: str, category: str) -> None:
    """Judged on the points since the shift, not on a recent window still holding the old
    level (which took 8 logging steps: step 190 for a drop at 150)."""
    run = RUNS[name]()
    assert first_live(run, category) <= run.onset + 20  # logging every 5 steps


def test_a_watched_objective_falling_to_zero_is_hacking_even_on_a_far_smaller_scale() -> None:
    """The proxy pays -28..-1 (a length penalty); the monitor-only objective is a 0..1 format
    check that falls from 0.75 to 0. Judged against the total reward's spread (27) its fall
    (0.75) looked like a wobble; against its own level it lost everything."""
    from app.diagnostics import RunContext, diagnose

    rows = [(s, {"reward": -28 + 27 * min(1, s / 15), "reward_std": 3.0,
                 "rewards/length_target/mean": -28 + 27 * min(1, s / 15),
                 "rewards/format_regex/mean": max(0.0, 0.75 - 0.05 * s) + 0.1 * (s % 2) * (s < 10),
                 "frac_reward_zero_std": 0.0}) for s in range(1, 46)]
    context = RunContext(reward_weights={"length_target": 1.0, "format_regex": 0.0})
    found = [f for f in diagnose(rows, context).findings if f.category == "reward_hacking"]
    assert len(found) == 1 and found[0].evidence["objective"] == "format_regex"
    assert found[0].evidence["objective_is_monitor_only"] is True
