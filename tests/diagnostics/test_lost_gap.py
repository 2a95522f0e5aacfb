"""The lost check's thresholds: five expected report intervals of silence warn, twenty are
critical, and never under a minimum gap (two minutes to warn, ten to fail), so a fast run that
pauses for a checkpoint or an eval pass is left alone."""

from __future__ import annotations

import math

import pytest

from app.diagnostics import RunContext, diagnose

NOW = 100_000.0


def rows(n: int = 20, every: int = 1, step_time: float | None = None, metric: str = "reward"):
    out = []
    for s in range(every, n * every + 1, every):
        d = {metric: 0.5, "loss": 0.01} if metric == "reward" else {metric: 0.01}
        if step_time is not None:
            d["step_time"] = step_time
        out.append((s, d))
    return out


def lost(data, gap: float, **ctx: object):
    context = RunContext(is_live=True, now=NOW, last_report_at=NOW - gap, **ctx)  # type: ignore[arg-type]
    return [f for f in diagnose(data, context).findings if f.category == "lost"]


def severity(data, gap: float, **ctx: object) -> str | None:
    found = lost(data, gap, **ctx)
    return found[0].severity if found else None


def test_a_fast_run_with_one_short_pause_is_not_lost() -> None:
    assert lost(rows(), 10.0, seconds_per_step=0.5) == []
    assert lost(rows(), 119.0, seconds_per_step=0.5) == []


@pytest.mark.parametrize("gap,expected", [(119.9, None), (120.0, "warning"), (599.0, "warning"),
                                          (600.0, "critical")])
def test_minimum_gaps_hold_for_fast_runs(gap: float, expected: str | None) -> None:
    assert severity(rows(), gap, seconds_per_step=0.5) == expected


@pytest.mark.parametrize("gap,expected", [(299.0, None), (300.0, "warning"), (1199.0, "warning"),
                                          (1200.0, "critical")])
def test_slow_runs_scale_with_their_step_time(gap: float, expected: str | None) -> None:
    assert severity(rows(), gap, seconds_per_step=60.0) == expected


@pytest.mark.parametrize("gap,expected", [(3599.0, None), (3600.0, "warning"),
                                          (14_399.0, "warning"), (14_400.0, "critical")])
def test_without_any_timing_only_an_hour_of_silence_counts(gap: float, expected) -> None:
    assert severity(rows(), gap) == expected


def test_the_step_time_metric_is_used_when_the_app_measured_nothing() -> None:
    data = rows(step_time=60.0)
    assert severity(data, 299.0) is None and severity(data, 300.0) == "warning"
    assert severity(data, 1200.0) == "critical"
    # the app's own measurement wins over the logged metric
    assert severity(data, 300.0, seconds_per_step=100.0) is None


def test_sparse_logging_widens_the_expected_interval() -> None:
    data = rows(n=10, every=10)  # one report per 10 steps, 6 s each: 60 s per report
    assert severity(data, 299.0, seconds_per_step=6.0) is None
    assert severity(data, 300.0, seconds_per_step=6.0) == "warning"
    (f,) = lost(data, 300.0, seconds_per_step=6.0)
    assert f.evidence["expected_report_interval_s"] == pytest.approx(60.0)


def test_loss_alone_gives_the_logging_interval_too() -> None:
    data = rows(n=10, every=10, metric="loss")
    assert severity(data, 299.0, seconds_per_step=6.0) is None
    assert severity(data, 300.0, seconds_per_step=6.0) == "warning"


def test_a_single_report_counts_as_one_step_per_report() -> None:
    data = [(50, {"reward": 0.5, "loss": 0.0})]
    assert severity(data, 299.0, seconds_per_step=60.0) is None
    assert severity(data, 300.0, seconds_per_step=60.0) == "warning"


def test_the_finding_says_how_long_and_since_which_step() -> None:
    (f,) = lost(rows(), 1800.0, seconds_per_step=2.0)
    assert (f.severity, f.first_step, f.last_step, f.metric) == ("critical", 20, 20, None)
    assert f.summary == ("No new metrics for 30 min after step 20 (usually one report every 2 s)"
                         ": the worker may have crashed or hung.")
    assert f.evidence == {"seconds_since_last_report": 1800.0,
                          "expected_report_interval_s": 2.0, "warning_after_s": 120.0}
    (g,) = lost(rows(), 3600.0)
    assert g.summary == "No new metrics for 60 min after step 20: the worker may have crashed or hung."
    assert g.evidence["expected_report_interval_s"] is None and g.evidence["warning_after_s"] == 3600.0
    assert g.actions and "worker" in g.actions[0]


@pytest.mark.parametrize("ctx", [
    {"is_live": False, "now": NOW, "last_report_at": 0.0},
    {"is_live": True, "now": None, "last_report_at": 0.0},
    {"is_live": True, "now": NOW, "last_report_at": None},
    {"is_live": True, "now": math.inf, "last_report_at": 0.0},
])
def test_no_verdict_without_a_live_run_and_both_times(ctx: dict) -> None:
    d = diagnose(rows(), RunContext(seconds_per_step=1.0, **ctx))
    assert "lost" not in d.categories


def test_a_run_logging_neither_reward_nor_loss_counts_one_step_per_report() -> None:
    data = [(s, {"kl": 0.01}) for s in range(10, 101, 10)]
    assert severity(data, 119.0, seconds_per_step=6.0) is None
    assert severity(data, 120.0, seconds_per_step=6.0) == "warning"


def test_a_reward_that_was_never_finite_does_not_set_the_logging_interval() -> None:
    data = [(s, {"reward": math.nan}) for s in range(10, 101, 10)]
    (f,) = lost(data, 200.0, seconds_per_step=6.0)
    assert f.evidence["expected_report_interval_s"] == pytest.approx(6.0)
