"""Degenerate completions seen in captured rollouts: repetitive loops, one answer per group, or
empty output.

The server turns each captured step's groups into ``rollouts/*`` metric rows (see
``app.rollouts.signals``), so this works from the text itself: it flags a run whose completions
degenerate even when entropy is not logged. One category, ``degenerate_completions``, with one
finding per signal (the finding's ``metric`` says which: repetition, identical groups or empty).
Rollouts are sampled (every Nth logging step), so windows are counted in captured points, not
steps, and the condition must hold over several of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import SMOOTH_PTS
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, r3, rolling_median, run_start, tail
from app.diagnostics.view import View

CATEGORY = "degenerate_completions"
MIN_PTS = 4  # captured steps needed before judging; the condition must last this many
WINDOW_FRAC = 0.25  # "current" = last quarter of the captured steps (at least MIN_PTS)
EMPTY_CRITICAL = 0.9  # nearly every completion is empty: nothing left to learn from

ACTIONS = ["Inspect rollouts at the flagged steps: what do the completions look like?",
           "Raise the sampling temperature or add an entropy bonus to restore diversity",
           "Check the reward functions for a loophole the degenerate output exploits",
           "Lower the learning rate"]


@dataclass(frozen=True)
class Signal:
    metric: str
    high: float  # sustained at or above this = degenerate
    what: str


SIGNALS = (
    # Loops: half of a completion's word 3-grams repeat (healthy text is well under 0.2).
    Signal("rollouts/repetition", 0.5, "of completions' word 3-grams are repeats (looping text)"),
    # Most groups sample one single answer: no diversity, no advantage, policy collapsed.
    Signal("rollouts/identical_group_frac", 0.75, "of groups sample the same completion G times"),
    Signal("rollouts/empty_frac", 0.3, "of completions are empty"),
)


def _finding(view: View, sig: Signal) -> Finding | None:
    s = view.series(sig.metric)
    if s is None or len(s) < MIN_PTS:
        return None
    smooth = rolling_median(s.values, SMOOTH_PTS)
    start = run_start(s.steps, smooth >= sig.high)
    current = med(tail(s.steps, s.values, WINDOW_FRAC, MIN_PTS))
    if start is None or current < sig.high or int((s.steps >= start).sum()) < MIN_PTS:
        return None
    critical = sig.metric == "rollouts/empty_frac" and current >= EMPTY_CRITICAL
    return Finding(
        category=CATEGORY, severity="critical" if critical else "warning",
        first_step=start, last_step=s.last,
        summary=f"{current:.0%} {sig.what} in captured rollouts since step {start}.",
        evidence={f"{sig.metric.split('/')[1]}_median": r3(current), "expected_below": sig.high,
                  "points": len(s)},
        actions=ACTIONS, metric=sig.metric)


def detect(view: View) -> list[Finding]:
    return [f for f in (_finding(view, sig) for sig in SIGNALS) if f is not None]


DETECTORS = (Detector("rollouts", tuple(sig.metric for sig in SIGNALS), detect),)
