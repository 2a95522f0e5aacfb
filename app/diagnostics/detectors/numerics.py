"""Numerical instability: NaN/inf in loss or grad_norm, and grad-norm spikes."""

from __future__ import annotations

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import spike_summary
from app.diagnostics.model import Finding
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


def _grad_spikes(view: View) -> list[Finding]:
    sp = spike_summary(view, "grad_norm")
    if sp is None:
        return []
    return [Finding(
        category="numerical_instability", severity=sp.severity, first_step=sp.first_step,
        last_step=sp.last_step, summary=sp.text("grad_norm spike") + ".",
        evidence=sp.evidence("grad_norm"), actions=ACTIONS, metric="grad_norm")]


DETECTORS = (Detector("nonfinite", CRITICAL_NONFINITE + WARNING_NONFINITE, _nonfinite,
                       needs=CRITICAL_NONFINITE + WARNING_NONFINITE),  # any of them
             Detector("grad_spikes", ("grad_norm",), _grad_spikes))
