"""Bounded per-metric history: step buckets that double in width, plus spike episodes.

Why buckets: the app updates diagnostics as each batch arrives, and runs reach hundreds of
thousands of steps. Each metric keeps at most ``MAX_BUCKETS`` buckets of ``width`` steps
(sum, count, min, max, step sum); when full, the width doubles and neighbours merge. Memory
and per-update cost are therefore bounded, and the early part of the run (baselines) and the
running best stay visible at coarser resolution. Short runs (width 1) are kept exactly.

Why spike exclusion: an isolated KL or grad-norm spike would inflate a bucket mean and look
like a sustained level change. Points far above the recent typical value (see
``SPIKE_RATIO``/``SPIKE_K``) are kept out of the buckets and recorded as *episodes* of
consecutive elevated rows; an episode of <= ``ISOLATED_MAX_ROWS`` rows is an isolated spike,
a longer one is a level shift (its later points re-enter the buckets as the reference adapts).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MAX_BUCKETS = 128  # resolution of the trend view; 128 points are plenty for rank tests
SPIKE_METRICS = ("kl", "grad_norm")
SPIKE_RATIO = 10.0  # a spike is an order of magnitude above the typical value ...
SPIKE_K = 8.0  # ... and far outside the robust spread, so ordinary noise never qualifies
SPIKE_MIN_REF = 8  # need this many positive reference values before calling anything a spike
# ... and a spike must also clear an absolute floor (issue 54): against a KL estimator that
# hovers around 0 (its few positive values tiny) or a grad norm of 1e-4 (no reward spread, no
# gradient), "ten times the typical value" is still nothing. KL: a tenth of a nat per token is
# where a single step starts to move the policy visibly; grad norm: 1.0 is TRL's default
# max_grad_norm, below which no step was clipped, so no step was larger than a normal one.
SPIKE_FLOOR = {"kl": 0.1, "grad_norm": 1.0}
RING = 32  # raw recent values kept as the spike reference (adapts to level shifts)
ISOLATED_MAX_ROWS = 2
MAX_EPISODES = 64  # keep the latest episodes (plus totals) so the state stays small


@dataclass
class MetricHistory:
    """Bucketed history of one metric. All fields are JSON-friendly once listified."""

    width: int = 1
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    vsum: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ssum: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cnt: np.ndarray = field(default_factory=lambda: np.zeros(0))
    vmin: np.ndarray = field(default_factory=lambda: np.zeros(0))
    vmax: np.ndarray = field(default_factory=lambda: np.zeros(0))
    last_step: int = -(2**62)
    first_step: int | None = None
    n_rows: int = 0
    gmin: float | None = None
    gmax: float | None = None
    nonfinite: list = field(default_factory=lambda: [0, None, None, None])  # n, first, last, example
    ring: list = field(default_factory=list)
    episodes: list = field(default_factory=list)  # [first, last, rows, peak, peak_step]
    open_ep: list | None = None
    n_isolated_closed: int = 0
    n_shift_closed: int = 0

    # ---- ingestion -------------------------------------------------------------------
    def add(self, name: str, steps: np.ndarray, values: np.ndarray) -> None:
        """Append points with steps > last_step (re-sent steps are ignored: idempotent)."""
        keep = steps > self.last_step
        if not keep.all():
            steps, values = steps[keep], values[keep]
        if len(steps) == 0:
            return
        if self.first_step is None:
            self.first_step = int(steps[0])
        self.last_step = int(steps[-1])
        self.n_rows += len(steps)
        finite = np.isfinite(values)
        if not finite.all():
            self._note_nonfinite(steps[~finite], values[~finite])
            steps, values = steps[finite], values[finite]
        if len(values) == 0:
            return
        lo, hi = float(values.min()), float(values.max())
        self.gmin = lo if self.gmin is None else min(self.gmin, lo)
        self.gmax = hi if self.gmax is None else max(self.gmax, hi)
        if name in SPIKE_METRICS:
            ok = self._judge_spikes(steps, values, SPIKE_FLOOR[name])
            self._bucket(steps[ok], values[ok])
        else:
            self._bucket(steps, values)

    def _note_nonfinite(self, steps: np.ndarray, values: np.ndarray) -> None:
        n, first, _, example = self.nonfinite
        self.nonfinite = [n + len(steps), int(steps[0]) if first is None else first,
                          int(steps[-1]), example if example is not None else str(values[0])]

    def _judge_spikes(self, steps: np.ndarray, values: np.ndarray, floor: float) -> np.ndarray:
        """Boolean mask of points to bucket; elevated points become episode rows.

        Each point is judged against the ``RING`` raw values logged just before it, whatever
        batch it came in: the verdict on a point (and so the whole history) is the same for one
        row per request, any batch size, or a one-shot import (issue 31)."""
        allv = np.concatenate([np.asarray(self.ring, float), values])
        elevated = _elevated(allv, len(allv) - len(values), floor)
        self.ring = [float(x) for x in allv[-RING:]]
        idx = np.flatnonzero(elevated)
        if len(idx) == 0:
            self._close_episode()
            return ~elevated
        keep = ~elevated
        prev = -1
        for i in idx:  # elevated points are rare: a Python loop over them is cheap
            if i != prev + 1:
                self._close_episode()
            self._extend_episode(int(steps[i]), float(values[i]))
            if self.open_ep is not None and self.open_ep[2] > ISOLATED_MAX_ROWS:
                keep[i] = True  # a sustained episode is a level shift: the level series needs it
            prev = i
        if prev != len(values) - 1:
            self._close_episode()
        return keep

    def _extend_episode(self, step: int, value: float) -> None:
        ep = self.open_ep
        if ep is None:
            self.open_ep = [step, step, 1, value, step]
        else:
            ep[1], ep[2] = step, ep[2] + 1
            if value > ep[3]:
                ep[3], ep[4] = value, step

    def _close_episode(self) -> None:
        if self.open_ep is None:
            return
        ep, self.open_ep = self.open_ep, None
        self.episodes.append(ep)
        if len(self.episodes) > MAX_EPISODES:
            old = self.episodes.pop(0)
            if old[2] <= ISOLATED_MAX_ROWS:
                self.n_isolated_closed += 1
            else:
                self.n_shift_closed += 1

    def _bucket(self, steps: np.ndarray, values: np.ndarray) -> None:
        if len(steps) == 0:
            return
        self._widen_for(steps)
        keys = np.concatenate([self.keys, steps // self.width])
        self._reduce(keys,
                     np.concatenate([self.vsum, values]), np.concatenate([self.ssum, steps]),
                     np.concatenate([self.cnt, np.ones(len(values))]),
                     np.concatenate([self.vmin, values]), np.concatenate([self.vmax, values]))
        while len(self.keys) > MAX_BUCKETS:
            self.width *= 2
            self._reduce(self.keys // 2, self.vsum, self.ssum, self.cnt, self.vmin, self.vmax)

    def _widen_for(self, steps: np.ndarray) -> None:
        """Pick the final width before reducing a large batch (one-shot imports): the same
        width repeated doubling would reach, without reducing 100k points ten times."""
        if len(steps) <= MAX_BUCKETS:
            return
        w, lo = self.width, self.keys * self.width
        while True:
            k = np.concatenate([lo // w, steps // w])
            if 1 + int(np.count_nonzero(k[1:] != k[:-1])) <= MAX_BUCKETS:
                break
            w *= 2
        if w != self.width:
            factor, self.width = w // self.width, w
            if len(self.keys):
                self._reduce(self.keys // factor, self.vsum, self.ssum, self.cnt, self.vmin,
                             self.vmax)

    def _reduce(self, keys, vsum, ssum, cnt, vmin, vmax) -> None:
        """Merge entries with equal keys; keys are sorted (steps arrive in order)."""
        starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
        self.keys = keys[starts].astype(np.int64)
        self.vsum = np.add.reduceat(vsum, starts)
        self.ssum = np.add.reduceat(np.asarray(ssum, float), starts)
        self.cnt = np.add.reduceat(cnt, starts)
        self.vmin = np.minimum.reduceat(vmin, starts)
        self.vmax = np.maximum.reduceat(vmax, starts)

    # ---- reading ---------------------------------------------------------------------
    def series(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean step, mean value) per bucket, spike-free."""
        if len(self.cnt) == 0:
            return np.zeros(0), np.zeros(0)
        return self.ssum / self.cnt, self.vsum / self.cnt

    def all_episodes(self) -> list[list]:
        """Closed episodes plus the open one (an open episode counts as it stands)."""
        return self.episodes + ([list(self.open_ep)] if self.open_ep else [])

    # ---- persistence -----------------------------------------------------------------
    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in ("width", "last_step", "first_step", "n_rows", "gmin",
                                           "gmax", "nonfinite", "ring", "episodes", "open_ep",
                                           "n_isolated_closed", "n_shift_closed")}
        for k in ("keys", "vsum", "ssum", "cnt", "vmin", "vmax"):
            d[k] = getattr(self, k).tolist()
        return d

    @classmethod
    def from_json(cls, d: dict) -> MetricHistory:
        h = cls()
        for k, v in d.items():
            if k == "keys":
                h.keys = np.asarray(v, np.int64)
            elif k in ("vsum", "ssum", "cnt", "vmin", "vmax"):
                setattr(h, k, np.asarray(v, float))
            elif hasattr(h, k):
                setattr(h, k, v)
        return h



def _row_median(sorted_rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of each row's first ``counts`` entries (rows sorted ascending, NaN last)."""
    rows = np.arange(len(counts))
    return (sorted_rows[rows, (counts - 1) // 2] + sorted_rows[rows, counts // 2]) / 2


def _elevated(allv: np.ndarray, start: int, floor: float = 0.0) -> np.ndarray:
    """For each of ``allv[start:]``: is it a spike against the positive values among the
    ``RING`` values before it? (an order of magnitude above their median and ``SPIKE_K``
    robust standard deviations above it, and above ``floor``; no verdict before
    ``SPIKE_MIN_REF`` positive references)."""
    n = len(allv) - start
    out = np.zeros(n, bool)
    if n == 0:
        return out
    padded = np.concatenate([np.full(RING, np.nan), np.where(allv > 0, allv, np.nan)])
    windows = np.lib.stride_tricks.sliding_window_view(padded[:-1], RING)[start:]
    counts = np.count_nonzero(~np.isnan(windows), axis=1)
    judged = np.flatnonzero(counts >= SPIKE_MIN_REF)
    if len(judged) == 0:
        return out
    w, c = np.sort(windows[judged], axis=1), counts[judged]
    typ = _row_median(w, c)
    rows = np.arange(len(c))
    dev = np.sort(np.abs(w - typ[:, None]), axis=1)  # NaN stays NaN and sorts last
    # spread: the larger of two estimates of a normal's sigma, 1.4826 MAD and IQR / 1.349; the
    # MAD alone is 0 for a two-level series such as 1, 20, 1, 20, ... (nothing there is a spike)
    iqr = w[rows, (3 * (c - 1)) // 4] - w[rows, (c - 1) // 4]
    sig = np.maximum(1.4826 * _row_median(dev, c), iqr / 1.349)
    v = allv[start:][judged]
    out[judged] = (v > SPIKE_RATIO * typ) & (v > typ + SPIKE_K * sig) & (v > floor)
    return out
