"""Helpers several detectors share: is the reward improving, standard windows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.diagnostics.history import ISOLATED_MAX_ROWS
from app.diagnostics.stats import head, med, noise_sigma, r3, rho_crit, run_start, spearman, tail
from app.diagnostics.view import Series, View

EARLY_FRAC = 0.15  # "early baseline" = first 15% of the observed steps ...
RECENT_FRAC = 0.2  # ... "recent level" = last 20%; both at least MIN_WINDOW_PTS points
MIN_WINDOW_PTS = 3
IMPROVE_SIGMA = 1.0  # gain of one noise sigma with a significant rank trend = improving
MIN_TREND_PTS = 6  # fewer points cannot show a significant rank trend (rho_crit > 0.7)
SMOOTH_PTS = 3  # rolling-median width that removes single-row noise without hiding a change
NO_NOISE = 1e-12  # stands in for a zero noise estimate (constant series) in divisions


def early(s: Series) -> np.ndarray:
    return head(s.steps, s.values, EARLY_FRAC, MIN_WINDOW_PTS)


def starting_level(s: Series) -> float:
    """The level a fall is measured from: the early window's median, or the first points' when
    they were higher (issue 54: a run that collapsed within its first 5 % has its early window
    at the collapsed level already, and "entropy 0.21 -> 2e-4 by step 12 of 262" read as flat)."""
    return max(med(early(s)), med(s.values[:MIN_WINDOW_PTS]))


def recent(s: Series, frac: float = RECENT_FRAC) -> np.ndarray:
    return tail(s.steps, s.values, frac, MIN_WINDOW_PTS)


def trend(s: Series) -> tuple[float, float]:
    """(Spearman rho, critical rho) of a series against step."""
    return spearman(s.steps, s.values), rho_crit(len(s))


def improving(s: Series | None) -> bool:
    """Significant upward trend and a recent level at least a noise sigma above early."""
    if s is None or len(s) < MIN_TREND_PTS:
        return False
    rho, crit = trend(s)
    sigma = noise_sigma(s.values) or NO_NOISE
    return rho >= crit and (med(recent(s)) - med(early(s))) >= IMPROVE_SIGMA * sigma


def task_reward(view: View) -> Series | None:
    """The total reward (``reward``); the sum of components when it is missing."""
    return view.series("reward")


SPIKE_WARN_COUNT = 3  # one or two isolated spikes happen in healthy runs; repeated ones do not
SPIKE_SHOWN = 5  # the largest spikes listed in the evidence; the count covers all of them
ABOVE_TYPICAL = 2.0  # a spike also clears twice the run's typical level (issue 54): a point
#                      on KL's early rise from 0 is far above the tiny values before it, yet
#                      below where the run settles; it is the ramp, not a spike


@dataclass(frozen=True)
class SpikeSummary:
    """Isolated spikes of one metric: how many, where, the largest still in the history."""

    count: int
    first_step: int
    last_step: int
    largest: list[tuple[int, float]]  # (step, peak), largest first; empty when all are old
    typical: float

    @property
    def severity(self) -> str:
        return "warning" if self.count >= SPIKE_WARN_COUNT else "info"

    def text(self, what: str) -> str:
        """'N <what>s (up to X at step S) against a typical T'; the history keeps only the
        latest episodes, so when every kept one is a longer burst the peak is not known."""
        peak = (f"up to {self.largest[0][1]:.3g} at step {self.largest[0][0]}" if self.largest
                else "older than the kept history")
        return (f"{self.count} {what}{'s' if self.count > 1 else ''} ({peak}) against a "
                f"typical {self.typical:.3g}")

    def evidence(self, metric: str) -> dict:
        return {"spike_count": self.count, "largest_spikes": [[s, v] for s, v in self.largest],
                f"typical_{metric}": r3(self.typical), "warning_from_count": SPIKE_WARN_COUNT}


def spike_summary(view: View, metric: str) -> SpikeSummary | None:
    """Isolated spikes (episodes of <= ISOLATED_MAX_ROWS rows) of ``metric``, or None.

    Shared by the KL and grad-norm detectors: one copy of the logic that must cope with the
    isolated episodes having been dropped from the bounded history (only counted)."""
    h = view.hist(metric)
    if h is None:
        return None
    s = view.series(metric)
    typical = med(s.values) if s is not None else float("nan")
    iso = [e for e in h.all_episodes() if e[2] <= ISOLATED_MAX_ROWS
           and not e[3] <= ABOVE_TYPICAL * typical]
    n = len(iso) + h.n_isolated_closed
    if n == 0:
        return None
    top = sorted(iso, key=lambda e: -e[3])[:SPIKE_SHOWN]
    return SpikeSummary(
        count=n, first_step=int(iso[0][0]) if iso else int(h.first_step),
        last_step=int(iso[-1][1]) if iso else int(h.last_step),
        largest=[(int(e[4]), r3(float(e[3]))) for e in top], typical=typical)


SETTLED_MIN_PTS = 3  # a level shift is judged on the points after it once there are 3 ...
SETTLED_MIN_STEPS = 10  # ... spanning 10 steps (one noisy row is not a shift)


def settled_since(s: Series, mask: np.ndarray) -> tuple[int, np.ndarray] | None:
    """(first step, values) of the trailing run where ``mask`` holds, when it is long enough
    and began after the first point; else None.

    Why: "recent" windows are a fixed share of the run, so right after a sudden shift they
    still hold the old level and a collapse or blow-up is only seen once the window has moved
    past it (a fifth of the run later). Judging the points since the shift removes that lag."""
    start = run_start(s.steps, mask)
    if start is None or start == s.first:
        return None
    after = s.values[s.steps >= start]
    if len(after) < SETTLED_MIN_PTS or s.last - start < SETTLED_MIN_STEPS:
        return None
    return start, after
