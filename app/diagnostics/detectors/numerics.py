"""Numerical instability: NaN/inf in loss or grad_norm, and grad-norm spikes."""

from __future__ import annotations

import numpy as np

from app.diagnostics.detector import Detector
from app.diagnostics.detectors import zero_spread
from app.diagnostics.detectors.common import SpikeSummary, spike_summary
from app.diagnostics.history import ISOLATED_MAX_ROWS
from app.diagnostics.model import Finding
from app.diagnostics.stats import med
from app.diagnostics.view import View

CRITICAL_NONFINITE = ("loss", "grad_norm")  # the optimiser step itself is broken
WARNING_NONFINITE = ("reward", "kl", "entropy")  # a logged statistic overflowed

ACTIONS = ["Lower the learning rate", "Check bf16/fp16 settings (fp16 overflows easily)",
           "Enable or tighten gradient clipping (max_grad_norm)"]


def _nonfinite(view: View) -> list[Finding]:
    out = []
    for name in CRITICAL_NONFINITE + WARNING_NONFINITE:
        h = view.hist(name)
        if h is None or not h.nonfinite[0]:
            continue
        n, first, last, example = h.nonfinite
        out.append(Finding(
            category="numerical_instability",
            severity="critical" if name in CRITICAL_NONFINITE else "warning",
            first_step=first, last_step=last,
            summary=f"{name} is {example} on {n} logged step{'s' if n > 1 else ''} "
                    f"(first at step {first}).",
            evidence={"metric": name, "nonfinite_rows": n, "example_value": example,
                      "expected": "finite values"},
            actions=ACTIONS, metric=name))
    return out


def _spread_steps(view: View, steps: list[int]) -> list[int] | None:
    """The spike steps, when most of the run had no reward spread and every spike fell on a
    step that had some: then the spikes are the only real updates (on the others the advantage
    is 0 and so is the gradient, bar the KL term), not instability. None otherwise."""
    s, _ = zero_spread.signal(view)
    if s is None or not steps or med(s.values) < zero_spread.HIGH:
        return None
    at = np.searchsorted(s.steps, steps)
    exact = (at < len(s)) & (s.steps[np.minimum(at, len(s) - 1)] == steps)
    if not exact.all() or (s.values[at] >= zero_spread.CRITICAL).any():
        return None
    return steps


def _explained(view: View, sp: SpikeSummary) -> list[Finding]:
    h = view.hist("grad_norm")
    steps = sorted({int(e[4]) for e in h.all_episodes() if e[2] <= ISOLATED_MAX_ROWS})
    spread = _spread_steps(view, steps) if h.n_isolated_closed == 0 else None
    if spread is None:
        return []
    return [Finding(
        category="zero_reward_spread", severity="info", first_step=sp.first_step,
        last_step=sp.last_step,
        summary=(sp.text("grad_norm spike") + f", all on steps that had reward spread (steps "
                 f"{', '.join(map(str, spread[:8]))}{' ...' if len(spread) > 8 else ''}) while "
                 "most steps had none: the gradient is ~0 on the steps without spread, so the "
                 "few real updates look like spikes. This is zero reward spread, not numerical "
                 "instability."),
        evidence={**sp.evidence("grad_norm"), "spike_steps_with_spread": spread[:20]},
        actions=zero_spread.ACTIONS["mixed"], metric="grad_norm")]


def _grad_spikes(view: View) -> list[Finding]:
    sp = spike_summary(view, "grad_norm")
    if sp is None:
        return []
    explained = _explained(view, sp)
    if explained:
        return explained
    return [Finding(
        category="numerical_instability", severity=sp.severity, first_step=sp.first_step,
        last_step=sp.last_step, summary=sp.text("grad_norm spike") + ".",
        evidence=sp.evidence("grad_norm"), actions=ACTIONS, metric="grad_norm")]


DETECTORS = (Detector("nonfinite", CRITICAL_NONFINITE + WARNING_NONFINITE, _nonfinite,
                       needs=CRITICAL_NONFINITE + WARNING_NONFINITE),  # any of them
             Detector("grad_spikes", ("grad_norm", zero_spread.METRIC, zero_spread.ZERO_STD_STEPS),
                      _grad_spikes))
