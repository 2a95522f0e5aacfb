"""Dead reward component: a reward function that returned the same value all run.

Info as a rule: a penalty that never triggers is constant at 0 too, and harmless. A warning
when the dead component is the task itself (named like correctness/accuracy/answer, as the
hacking pass reads objectives) sitting at its floor (never above 0): the model never once
solved the task, so whatever else the total does, the run is not learning it (issue 54: a
39-step run with its correctness reward 0 on every step passed as healthy)."""

from __future__ import annotations

from app.diagnostics.detector import COMPONENTS, Detector
from app.diagnostics.detectors.hacking import OBJECTIVE_NAME
from app.diagnostics.model import Finding
from app.diagnostics.view import View

MIN_ROWS = 5  # a constant over a handful of rows is not yet evidence
TOL = 1e-9
NEAR_SHARE = 0.02  # a component whose whole range is within 2 % of its level (0.05 on every
#                    row but one at 0.049) is as dead: float noise or one odd batch is no signal

TASK_ACTIONS = ["Dry-run the task reward on sample outputs: does any completion ever score?",
                "Use easier prompts or a curriculum so some completions solve the task",
                "Check the answer extraction (regex, format) matches what the model writes"]
ACTIONS = ["Dry-run this reward function on sample outputs: can it ever return another value?",
           "Check its regex/format expectations match what the model writes",
           "Remove it if it is not meant to contribute"]


def detect(view: View) -> list[Finding]:
    out = []
    for name in view.components():
        h = view.hist(name)
        if h is None or h.gmin is None or h.n_rows < MIN_ROWS:
            continue
        level = max(abs(h.gmax), abs(h.gmin))
        if h.gmax - h.gmin <= max(TOL * max(1.0, level), NEAR_SHARE * level):
            f = name.split("/")[1]
            task = bool(OBJECTIVE_NAME.search(f)) and h.gmax <= 0
            out.append(Finding(
                category="dead_reward_component", severity="warning" if task else "info",
                first_step=h.first_step, last_step=h.last_step,
                summary=f"Reward component '{f}' was {h.gmax:.3g} on every step: it never "
                        "varies, so it contributes no learning signal"
                        + (" (the task itself: no completion ever solved it)." if task else "."),
                evidence={"component": f, "constant_value": h.gmax, "rows": h.n_rows,
                          "task_reward_at_floor": task},
                actions=TASK_ACTIONS if task else ACTIONS, metric=name))
    return out


DETECTORS = (Detector("dead_component", (COMPONENTS,), detect),)
