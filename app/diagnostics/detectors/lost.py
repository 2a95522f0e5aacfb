"""Lost run: a live run stopped reporting for much longer than its usual step time."""

from __future__ import annotations

import numpy as np

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import recent
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, r3
from app.diagnostics.view import View

WARN_FACTOR = 5.0  # five expected report intervals of silence
CRITICAL_FACTOR = 20.0
MIN_GAP_S = 120.0  # never alarm on short gaps (checkpoint saves, eval passes)
NO_TIMING_GAP_S = 3600.0  # without any step timing, only an hour of silence is alarming
NO_TIMING_CRITICAL_S = 4 * NO_TIMING_GAP_S  # ... and four hours is a dead run
MIN_CRITICAL_GAP_S = 5 * MIN_GAP_S  # never critical before ten minutes of silence

ACTIONS = ["Check the worker process and its logs (crashed, OOM-killed, or hung?)",
           "Mark the run failed and restart from the last checkpoint if it is dead"]


def _expected_interval(view: View) -> float | None:
    """Seconds between metric reports: seconds per step times steps per report."""
    spt = view.context.seconds_per_step
    st = view.series("step_time")
    if spt is None and st is not None:
        spt = med(recent(st))
    r = view.series("reward") or view.series("loss")
    h = view.hist("reward") or view.hist("loss")
    per_report = 1.0
    if r is not None and h is not None and len(r) >= 2 and h.n_rows >= 2:
        per_report = max(1.0, (h.last_step - h.first_step) / (h.n_rows - 1))
    return spt * per_report if spt else None


def detect(view: View) -> list[Finding]:
    ctx = view.context
    if not ctx.is_live or ctx.now is None or ctx.last_report_at is None:
        return []
    gap = ctx.now - ctx.last_report_at
    expected = _expected_interval(view)
    if expected is None:
        warn, crit = NO_TIMING_GAP_S, NO_TIMING_CRITICAL_S
    else:
        warn = max(WARN_FACTOR * expected, MIN_GAP_S)
        crit = max(CRITICAL_FACTOR * expected, MIN_CRITICAL_GAP_S)
    if not np.isfinite(gap) or gap < warn:
        return []
    step = view.last_step
    return [Finding(
        category="lost", severity="critical" if gap >= crit else "warning",
        first_step=step, last_step=step,
        summary=(f"No new metrics for {gap / 60:.0f} min after step {step}"
                 + (f" (usually one report every {expected:.0f} s)" if expected else "")
                 + ": the worker may have crashed or hung."),
        evidence={"seconds_since_last_report": r3(gap),
                  "expected_report_interval_s": r3(expected) if expected else None,
                  "warning_after_s": r3(warn)},
        actions=ACTIONS, metric=None)]


READS = ("step_time", "reward", "loss")
DETECTORS = (Detector("lost", READS, detect, needs=READS),)  # any progress signal
