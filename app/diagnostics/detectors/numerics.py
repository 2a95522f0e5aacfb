"""Numerical instability: NaN/inf in loss or grad_norm, grad-norm spikes, and a loss or grad
norm that blows up by orders of magnitude (whichever of them is logged: a hand-written loop
often logs only its loss, issue 54)."""

from __future__ import annotations

import numpy as np

from app.diagnostics.detector import Detector
from app.diagnostics.detectors import zero_spread
from app.diagnostics.detectors.common import SpikeSummary, spike_summary
from app.diagnostics.history import ISOLATED_MAX_ROWS
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, r3
from app.diagnostics.view import View

CRITICAL_NONFINITE = ("loss", "grad_norm")  # the optimiser step itself is broken
WARNING_NONFINITE = ("reward", "kl", "entropy")  # a logged statistic overflowed

BLOWUP_METRICS = ("loss", "grad_norm")
BLOWUP_ORDERS = 1e3  # three orders of magnitude above the run's early typical size ...
BLOWUP_FLOOR = 100.0  # ... and above 100: a GRPO loss or a (clipped-to-1.0 by default) grad
#                       norm never is, so a loss near 0 moving to 0.5 does not qualify
EARLY_SHARE = 0.25  # the typical size: median |value| over the first quarter of the buckets

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
    if sp is None or _blowup_of(view, "grad_norm") is not None:
        return []  # a blow-up is one finding on grad_norm, not also a list of its spikes
    explained = _explained(view, sp)
    if explained:
        return explained
    return [Finding(
        category="numerical_instability", severity=sp.severity, first_step=sp.first_step,
        last_step=sp.last_step, summary=sp.text("grad_norm spike") + ".",
        evidence=sp.evidence("grad_norm"), actions=ACTIONS, metric="grad_norm")]


def _blowup_of(view: View, name: str) -> Finding | None:
    """``name`` reached BLOWUP_ORDERS times its early typical size (and BLOWUP_FLOOR)."""
    h = view.hist(name)
    if h is None or h.gmax is None or len(h.cnt) < 4 or h.nonfinite[0]:
        return None  # a non-finite value is already its own (critical) finding on this metric
    means = np.abs(h.vsum / h.cnt)
    typical = med(means[: max(2, int(len(means) * EARLY_SHARE))])
    threshold = max(BLOWUP_ORDERS * typical, BLOWUP_FLOOR)
    peak = max(abs(h.gmax), abs(h.gmin))
    if peak < threshold:
        return None
    above = np.flatnonzero(np.maximum(np.abs(h.vmax), np.abs(h.vmin)) >= threshold)
    peaks = [e for e in h.all_episodes() if e[3] >= threshold]
    first = min([int(h.keys[i] * h.width) for i in above] + [int(e[0]) for e in peaks]
                + [h.last_step])
    first = max(first, int(h.first_step))
    still = len(above) > 0 and above[-1] == len(h.cnt) - 1
    return Finding(
        category="numerical_instability", severity="critical" if still else "warning",
        first_step=first, last_step=h.last_step,
        summary=(f"{name} blew up to {peak:.3g} (its early typical size {typical:.3g}) from step "
                 f"{first}" + (" and stays there: the optimiser steps are broken." if still
                               else "; it came back down, but those updates were broken.")),
        evidence={"metric": name, "peak": r3(peak), "early_typical": r3(typical),
                  "threshold": r3(threshold), "buckets_above": len(above) + len(peaks),
                  "expected_below": r3(threshold)},
        actions=ACTIONS, metric=name)


def _blowup(view: View) -> list[Finding]:
    """The first of loss / grad_norm that blew up (one finding: they blow up together)."""
    for name in BLOWUP_METRICS:
        found = _blowup_of(view, name)
        if found is not None:
            return [found]
    return []


DETECTORS = (Detector("blowup", BLOWUP_METRICS, _blowup, needs=BLOWUP_METRICS),
             Detector("nonfinite", CRITICAL_NONFINITE + WARNING_NONFINITE, _nonfinite,
                       needs=CRITICAL_NONFINITE + WARNING_NONFINITE),  # any of them
             Detector("grad_spikes", ("grad_norm", zero_spread.METRIC, zero_spread.ZERO_STD_STEPS),
                      _grad_spikes))
