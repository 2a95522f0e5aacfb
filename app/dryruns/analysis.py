"""What a dry run's scores say about a reward, before any compute is spent on training.

The worker samples ``num_generations`` completions for a few prompts and scores each with every
reward; this module (pure, no model) turns those scores into what a person needs:

- each reward component's distribution;
- the share of groups whose total reward has zero spread, split into all-fail and all-pass.
  GRPO's advantage is (reward - group mean) / group std: a group with zero spread teaches
  nothing (TRL logs the same share as ``frac_reward_zero_std``);
- group-size advice: with each prompt's observed success rate p, a group of G independent
  completions has zero spread with probability p^G + (1-p)^G (all pass or all fail), so the
  expected share of zero-spread groups at G is the mean of that over prompts
  (../shared/design/grpo-notes.md);
- a plain verdict.

"Success" needs a threshold: a completion passes when its total reward is above the midpoint of
the range of totals seen in this dry run. For a 0/1 reward that is exactly "reward = 1"; for a
graded reward it splits the observed range in two. With no range at all nothing passes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

GROUP_SIZES = (2, 4, 8, 16)
SPREAD_EPS = 1e-9  # totals closer than this count as equal (float noise)
HISTOGRAM_BINS = 10
WEAK_SHARE = 0.5  # at least half the groups without signal: most of each step is wasted
EXAMPLE_GROUPS = 3
EXAMPLE_CHARS = 600


def weighted_total(scores: dict[str, float | None], weights: dict[str, float]) -> float | None:
    """TRL's total: the sum of weight * component over the components that scored (None/NaN
    skipped); None when none did."""
    terms = [weights[n] * v for n, v in scores.items()
             if v is not None and math.isfinite(v)]
    return float(sum(terms)) if terms else None


def zero_spread_probability(p: float, g: int) -> float:
    """P(a group of g completions all pass or all fail) for success rate p."""
    return p ** g + (1 - p) ** g


def group_size_advice(rates: Sequence[float], sizes: Sequence[int] = GROUP_SIZES
                      ) -> list[dict[str, float]]:
    """Expected share of zero-spread groups per group size, over prompts with these rates."""
    out = []
    for g in sizes:
        fail = statistics.fmean((1 - p) ** g for p in rates) if rates else 1.0
        passes = statistics.fmean(p ** g for p in rates) if rates else 0.0
        out.append({"group_size": g, "zero_spread_share": fail + passes, "all_fail": fail,
                    "all_pass": passes})
    return out


def success_rates(totals: Sequence[Sequence[float | None]]) -> tuple[float, list[float]]:
    """(threshold, each group's success rate): a completion passes when its total is above the
    midpoint of the range of all totals seen (module docstring); a missing total fails."""
    flat = [t for ts in totals for t in ts if t is not None and math.isfinite(t)]
    threshold = (min(flat) + max(flat)) / 2 if flat else 0.0
    rates = [sum(t is not None and t > threshold for t in ts) / len(ts) if ts else 0.0
             for ts in totals]
    return threshold, rates


def distribution(values: Sequence[float | None]) -> dict[str, Any]:
    """count, missing (None/NaN), min/max/mean/std, quantiles and a histogram of the finite
    values."""
    finite = sorted(v for v in values if v is not None and math.isfinite(v))
    out: dict[str, Any] = {"count": len(values), "missing": len(values) - len(finite)}
    if not finite:
        return out
    lo, hi = finite[0], finite[-1]
    width = (hi - lo) / HISTOGRAM_BINS
    counts = [0] * HISTOGRAM_BINS
    for v in finite:
        counts[min(HISTOGRAM_BINS - 1, int((v - lo) / width)) if width else 0] += 1
    out.update(min=lo, max=hi, mean=statistics.fmean(finite),
               std=statistics.pstdev(finite) if len(finite) > 1 else 0.0,
               p10=_quantile(finite, 0.1), p50=_quantile(finite, 0.5), p90=_quantile(finite, 0.9),
               histogram={"edges": [lo + i * width for i in range(HISTOGRAM_BINS + 1)],
                          "counts": counts})
    return out


def _quantile(ordered: Sequence[float], q: float) -> float:
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def spread(values: Sequence[float | None]) -> float:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return max(finite) - min(finite) if len(finite) > 1 else 0.0


def verdict(share: float, failed: bool) -> tuple[str, str]:
    if failed:
        return "error", "a reward function raised: fix it before launching (traceback below)"
    if share >= 1.0:
        return "no_variation", ("this reward gives no variation: every group scored the same, "
                                "so the run will not learn")
    if share >= WEAK_SHARE:
        return "weak", (f"{share:.0%} of groups have no spread and teach nothing: try a larger "
                        "group, an easier or harder dataset, or a graded reward")
    return "ok", "rewards vary within groups: the run has a signal to learn from"


def analyse(raw: dict[str, Any]) -> dict[str, Any]:
    """The dry run's result from the worker's raw scores (``groups`` of completions, each with
    a score per reward; ``weights`` per reward; ``error`` when a reward or the model failed)."""
    weights: dict[str, float] = raw.get("weights") or {}
    groups: list[dict[str, Any]] = raw.get("groups") or []
    totals = [[weighted_total(c["rewards"], weights) for c in g["completions"]] for g in groups]
    flat = [t for ts in totals for t in ts if t is not None]
    threshold, rates = success_rates(totals)
    all_fail = all_pass = 0
    for ts, rate in zip(totals, rates, strict=True):
        if spread(ts) <= SPREAD_EPS:
            all_pass += rate == 1.0
            all_fail += rate < 1.0
    n = len(groups)
    share = (all_fail + all_pass) / n if n else 1.0
    key, text = verdict(share, bool(raw.get("error")))
    rewards = {}
    for name, weight in weights.items():
        per_group = [[c["rewards"].get(name) for c in g["completions"]] for g in groups]
        rewards[name] = {**distribution([v for vs in per_group for v in vs]),
                         "weight": weight,
                         "zero_spread_share": (sum(spread(vs) <= SPREAD_EPS for vs in per_group)
                                               / n if n else None)}
    return {"groups": n, "completions": sum(len(ts) for ts in totals),
            "zero_spread_share": share if n else None,
            "zero_spread_all_fail": all_fail / n if n else None,
            "zero_spread_all_pass": all_pass / n if n else None,
            "pass_threshold": threshold, "success_rates": rates,
            "group_size_advice": group_size_advice(rates), "rewards": rewards,
            "total": distribution(flat), "verdict": key, "verdict_text": text,
            "error": raw.get("error"), "examples": _examples(groups, totals),
            "timings": raw.get("timings") or {}, "reference": _reference(raw.get("reference"))}


def _reference(reference: dict[str, Any] | None) -> dict[str, Any] | None:
    """Per reward, the distribution of the reference answers' scores."""
    if not reference:
        return None
    return {"column": reference["column"], "count": reference["count"],
            "rewards": {k: distribution(v) for k, v in reference["rewards"].items()}}


def _examples(groups: list[dict[str, Any]], totals: list[list[float | None]]
              ) -> list[dict[str, Any]]:
    return [{"prompt": str(g.get("prompt", ""))[:EXAMPLE_CHARS],
             "completions": [{"text": str(c.get("text", ""))[:EXAMPLE_CHARS],
                              "rewards": c["rewards"], "total": t}
                             for c, t in zip(g["completions"], ts, strict=True)]}
            for g, ts in zip(groups[:EXAMPLE_GROUPS], totals, strict=False)]
