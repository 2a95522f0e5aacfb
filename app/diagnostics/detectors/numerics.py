"""Numerical instability: NaN/inf in loss or grad_norm, and grad-norm spikes."""

from __future__ import annotations

from app.diagnostics.history import ISOLATED_MAX_ROWS
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, r3
from app.diagnostics.view import View

CRITICAL_NONFINITE = ("loss", "grad_norm")  # the optimiser step itself is broken
WARNING_NONFINITE = ("reward", "kl", "entropy")  # a logged statistic overflowed
SPIKE_WARN_COUNT = 3  # one or two isolated spikes are normal; repeated ones are not

ACTIONS = ["Lower the learning rate", "Check bf16/fp16 settings (fp16 overflows easily)",
           "Enable or tighten gradient clipping (max_grad_norm)"]


def detect(view: View) -> list[Finding]:
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
    return out + _grad_spikes(view)


def _grad_spikes(view: View) -> list[Finding]:
    h = view.hist("grad_norm")
    if h is None:
        return []
    eps = h.all_episodes()
    iso = [e for e in eps if e[2] <= ISOLATED_MAX_ROWS]
    n = len(iso) + h.n_isolated_closed
    if n == 0:
        return []
    s = view.series("grad_norm")
    typical = med(s.values) if s is not None else float("nan")
    top = sorted(iso, key=lambda e: -e[3])[:5]
    return [Finding(
        category="numerical_instability",
        severity="warning" if n >= SPIKE_WARN_COUNT else "info",
        first_step=iso[0][0] if iso else h.first_step, last_step=iso[-1][1] if iso else h.last_step,
        summary=(f"{n} grad_norm spike{'s' if n > 1 else ''} (up to {top[0][3]:.3g} at step "
                 f"{top[0][4]}) against a typical {typical:.3g}."),
        evidence={"spike_count": n, "largest_spikes": [[int(e[4]), r3(e[3])] for e in top],
                  "typical_grad_norm": r3(typical), "warning_from_count": SPIKE_WARN_COUNT},
        actions=ACTIONS, metric="grad_norm")]
