"""Numerical instability: which metric's NaN/inf is critical, which only a warning, and the
grad-norm spike count that turns a note into a warning. Each metric is broken alone, so a
detector that only reacts to one of them cannot hide behind another."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from app.diagnostics import diagnose
from app.diagnostics.model import Finding
from app.health.service import _guard_rail
from app.health.stability import Memory, advance
from app.runs.models import Run

N = 30


def rows(broken: str | None = None, value: float = math.nan, at: tuple[int, ...] = (12,),
         grad: dict[int, float] | None = None) -> list[tuple[int, dict[str, float]]]:
    out = []
    for s in range(1, N + 1):
        d = {"loss": 0.01, "grad_norm": 0.5 + 0.01 * (s % 3), "reward": 0.5 + 0.001 * s,
             "kl": 0.01, "entropy": 0.8}
        if broken and s in at:
            d[broken] = value
        if grad and s in grad:
            d["grad_norm"] = grad[s]
        out.append((s, d))
    return out


def numerics(d):
    return [f for f in d.findings if f.category == "numerical_instability"]


def shown(findings: list[Finding], evaluations: int) -> list[Finding]:
    """What a live run's page shows after the detectors reported ``findings`` in this many
    consecutive evaluations, 3 steps apart (the guard rail acts on what is shown)."""
    out = []
    for f in findings:
        memory = Memory()
        for i in range(evaluations):
            memory = advance(memory, f.severity, step=N + 3 * i, live=True, new_steps=True,
                             category=f.category)
        if memory.shown is not None:
            out.append(replace(f, severity=memory.shown))
    return out


@pytest.mark.parametrize("metric,severity", [
    ("grad_norm", "critical"), ("loss", "critical"),
    ("reward", "warning"), ("kl", "warning"), ("entropy", "warning")])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_each_nonfinite_metric_alone(metric: str, severity: str, value: float) -> None:
    d = diagnose(rows(metric, value))
    (f,) = numerics(d)
    assert (f.severity, f.metric, f.first_step, f.last_step) == (severity, metric, 12, 12)
    assert d.verdict == severity
    text = repr(value)
    assert f.summary == f"{metric} is {text} on 1 logged step (first at step 12)."
    assert f.evidence == {"metric": metric, "nonfinite_rows": 1, "example_value": text,
                          "expected": "finite values"}
    assert any("learning rate" in a for a in f.actions)


def test_several_nonfinite_steps_are_counted_with_their_range() -> None:
    (f,) = numerics(diagnose(rows("grad_norm", math.nan, at=(5, 9, 20))))
    assert (f.first_step, f.last_step, f.evidence["nonfinite_rows"]) == (5, 20, 3)
    assert f.summary == "grad_norm is nan on 3 logged steps (first at step 5)."


def test_a_finite_run_has_no_numerics_finding() -> None:
    d = diagnose(rows())
    assert numerics(d) == [] and d.verdict == "healthy"


def test_nan_grad_norm_alone_stops_a_guarded_run() -> None:
    run = Run(id=1, name="r", status="running", max_steps=N, current_step=N,
              spec={"stop_on_critical": True})
    raw = diagnose(rows("grad_norm", math.nan)).findings
    stopped = []
    for evaluations in (1, 2, 3):
        _guard_rail(run, shown(raw, evaluations))
        stopped.append(run.cancel_requested_at is not None)
    assert stopped == [False, False, True]  # only once the critical is confirmed
    assert run.stop_reason == "stopped by diagnostics: grad_norm is nan on 1 logged step " \
                              "(first at step 12)."


def test_the_guard_rail_leaves_unguarded_and_warning_runs_alone() -> None:
    unguarded = Run(id=1, name="r", status="running", max_steps=N, current_step=N, spec={})
    critical = shown(diagnose(rows("grad_norm", math.nan)).findings, 3)
    assert [f.severity for f in critical] == ["critical"]  # confirmed, yet no guard rail asked
    _guard_rail(unguarded, critical)
    guarded = Run(id=2, name="r", status="running", max_steps=N, current_step=N,
                  spec={"stop_on_critical": True})
    warning = shown(diagnose(rows("kl", math.nan)).findings, 3)
    assert [f.severity for f in warning] == ["warning"]  # confirmed, but a warning only
    _guard_rail(guarded, warning)
    assert unguarded.cancel_requested_at is None and guarded.cancel_requested_at is None


@pytest.mark.parametrize("spikes,severity", [(1, "info"), (2, "info"), (3, "warning"),
                                             (4, "warning")])
def test_grad_norm_spikes_warn_from_the_third(spikes: int, severity: str) -> None:
    at = [10, 16, 22, 28][:spikes]  # each after the 8 values a spike is judged against
    heights = [40.0, 80.0, 60.0, 50.0][:spikes]
    d = diagnose(rows(grad=dict(zip(at, heights, strict=True))))
    (f,) = numerics(d)
    assert f.severity == severity and f.metric == "grad_norm"
    assert (f.first_step, f.last_step) == (at[0], at[-1])
    assert f.evidence["spike_count"] == spikes and f.evidence["warning_from_count"] == 3
    top = sorted(zip(at, heights, strict=True), key=lambda p: -p[1])
    assert f.evidence["largest_spikes"] == [[s, h] for s, h in top]
    assert f.evidence["typical_grad_norm"] == pytest.approx(0.51, abs=0.02)
    assert f.summary.startswith(f"{spikes} grad_norm spike{'s' if spikes > 1 else ''} "
                                f"(up to {max(heights):.3g} at step {top[0][0]})")
