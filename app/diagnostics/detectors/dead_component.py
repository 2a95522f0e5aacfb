"""Dead reward component: a reward function that returned the same value all run (info)."""

from __future__ import annotations

from app.diagnostics.detector import COMPONENTS, Detector
from app.diagnostics.model import Finding
from app.diagnostics.view import View

MIN_ROWS = 5  # a constant over a handful of rows is not yet evidence
TOL = 1e-9

ACTIONS = ["Dry-run this reward function on sample outputs: can it ever return another value?",
           "Check its regex/format expectations match what the model writes",
           "Remove it if it is not meant to contribute"]


def detect(view: View) -> list[Finding]:
    out = []
    for name in view.components():
        h = view.hist(name)
        if h is None or h.gmin is None or h.n_rows < MIN_ROWS:
            continue
        if h.gmax - h.gmin <= TOL * max(1.0, abs(h.gmax)):
            f = name.split("/")[1]
            out.append(Finding(
                category="dead_reward_component", severity="info", first_step=h.first_step,
                last_step=h.last_step,
                summary=f"Reward component '{f}' was {h.gmax:.3g} on every step: it never "
                        "varies, so it contributes no learning signal.",
                evidence={"component": f, "constant_value": h.gmax, "rows": h.n_rows},
                actions=ACTIONS, metric=name))
    return out


DETECTORS = (Detector("dead_component", (COMPONENTS,), detect),)
