"""No reward signal: the reward is the same for every completion, step after step.

Why its own finding (issue 54): such a run also has zero spread in every group, and the zero
spread rule placed the constant in its range and called it "prompts too easy", offering a larger
group. But when the reward never varies at all, no prompt, group size or difficulty gives a
group spread: the reward function itself returns one value (a judge that always answers the
same, a parser that never matches, a reward that ignores the completion). The fix is in the
reward function, so this finding carries no settings fix, and zero spread defers to it.
A reward that is 0 on every step is left to zero spread ("all_zero"): from the metrics alone it
is a task no completion solves as much as a reward that cannot pay out, and it says both.
"""

from __future__ import annotations

from app.diagnostics.detector import COMPONENTS, Detector
from app.diagnostics.detectors.zero_spread import METRIC, REWARD_STD, ZERO_STD_STEPS
from app.diagnostics.history import MetricHistory
from app.diagnostics.model import Finding
from app.diagnostics.stats import r3
from app.diagnostics.view import View

CATEGORY = "no_reward_signal"
MIN_ROWS = 5  # a constant over a handful of rows is not yet evidence (as dead_component)
TOL = 1e-9

ACTIONS = ["Dry-run the reward functions on sample outputs: do they ever return another value?",
           "Check the reward parses the completions (answer format, regex, judge prompt)",
           "Check the reward reads the completion at all (not only the prompt or a constant)",
           "If that score is the reward's maximum, every completion passes: use harder prompts"]


def constant(h: MetricHistory | None) -> bool:
    """Logged on MIN_ROWS rows or more with one value (finite values only)."""
    return (h is not None and h.gmin is not None and h.n_rows >= MIN_ROWS
            and h.gmax - h.gmin <= TOL * max(1.0, abs(h.gmax)))


def _spread_agrees(view: View) -> bool:
    """A spread metric was logged and every one logged says no group had spread: a constant
    batch mean alone could still hide groups that differ inside."""
    frac, std = view.hist(METRIC), view.hist(REWARD_STD)
    same = view.hist(ZERO_STD_STEPS)
    logged = [h for h in (frac, std, same) if h is not None and h.gmin is not None]
    return bool(logged) and ((frac is None or frac.gmin is None or frac.gmin >= 1.0)
                             and (std is None or std.gmax is None or std.gmax <= TOL)
                             and (same is None or same.gmin is None or same.gmin >= 1.0))


def detect(view: View) -> list[Finding]:
    h = view.hist("reward")
    if not constant(h) or not _spread_agrees(view) or h.gmax == 0:
        return []  # a constant 0 is zero spread of kind "all_zero": too hard, or never pays
    return [Finding(
        category=CATEGORY, severity="critical", first_step=h.first_step, last_step=h.last_step,
        summary=(f"The reward was {h.gmax:.3g} on every one of {h.n_rows} logged steps, with no "
                 "spread in any group: every completion gets the same score, so there is "
                 "nothing to learn from. A larger group cannot change that: either the reward "
                 "function does not depend on the completion, or (at its maximum) every prompt "
                 "is solved the same way."),
        evidence={"constant_reward": r3(h.gmax), "rows": h.n_rows,
                  "expected": "a reward that differs between completions"},
        actions=ACTIONS, metric="reward")]


DETECTORS = (Detector("no_signal", ("reward", METRIC, REWARD_STD, ZERO_STD_STEPS, COMPONENTS),
                      detect, needs=("reward",)),)
