"""A finding's evidence in words a person reads: one phrase per detector key, its value
formatted for that key (a share as a percent, a step as "step 41", a kind as what it means).

Why: the detectors' evidence is for the record (API, goldens, the webhook's JSON) and its keys
are the detectors' own (``kind``: ``too_hard``, ``exact_signal``: ``True``,
``judged_from_rows``: 3). The alerts page, the run page's finding details and every pushed
alert's text (webhook, mail, chat) show the same words from here. A key missing from the
table is still shown, its name humanised (``rows_at_each_end`` -> "rows at each end").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from app.health.headline import plain

Format = Callable[[Any], str]


def _number(value: Any) -> str:
    """Three significant digits for a float, the rest as ``plain`` says (yes/no, lists)."""
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.3g}"
    return plain(value)


def _signed(value: Any) -> str:
    return f"{value:+.3g}" if _finite(value) else _number(value)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(
        value)


def _percent(value: Any) -> str:
    return f"{value:.0%}" if _finite(value) else _number(value)


def _times(value: Any) -> str:
    return f"{_number(value)}×" if _finite(value) else _number(value)


def _sigmas(value: Any) -> str:
    return f"{_signed(value)} σ" if _finite(value) else _number(value)


def _step(value: Any) -> str:
    return f"step {value:.0f}" if _finite(value) else _number(value)


def _seconds(value: Any) -> str:
    return f"{value:.0f} s" if _finite(value) else _number(value)


def _bytes(value: Any) -> str:
    return f"{value / 2**30:.3g} GiB" if _finite(value) else _number(value)


def _rows(value: Any) -> str:
    return f"{value:.0f} rows" if _finite(value) else _number(value)


def _range(value: Any) -> str:
    if isinstance(value, list | tuple) and len(value) == 2:
        return f"{_number(value[0])} to {_number(value[1])}"
    return _number(value)


def _spikes(value: Any) -> str:
    """``[[step, value], ...]`` -> "60 at step 41, 58 at step 121"."""
    if not isinstance(value, list | tuple):
        return _number(value)
    pairs = [p for p in value if isinstance(p, list | tuple) and len(p) == 2]
    return ", ".join(f"{_number(v)} at {_step(s)}" for s, v in pairs) or _number(value)


def _steps(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "steps " + ", ".join(_number(v) for v in value)
    return _step(value)


def _shares(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_percent(v) for v in value)
    return _percent(value)


KINDS = {"too_easy": "prompts too easy: every completion of a group passes",
         "too_hard": "prompts too hard: every completion of a group fails",
         "mixed": "groups tie: some all pass, some all fail",
         "all_zero": "no completion earns any reward"}


def _kind(value: Any) -> str:
    return KINDS.get(value, humanise(str(value))) if isinstance(value, str) else _number(value)


def _signal(value: Any) -> str:
    if isinstance(value, bool):
        return "exact: every row shows it, no window needed" if value else "judged over a window"
    return _number(value)


def _moves(value: Any) -> str:
    """Reward components and how each moved: "format: rises, change +0.558 (+31.7 σ), ..."."""
    if not isinstance(value, Mapping):
        return _number(value)
    parts = []
    for component, move in value.items():
        if isinstance(move, Mapping):
            said = "; ".join(f"{label} {text}" if label else text
                             for label, text in evidence_words(move))
            parts.append(f"{component}: {said}")
        else:
            parts.append(f"{component}: {_number(move)}")
    return " · ".join(parts)


# key -> (phrase, format). Grouped by what reports them; a key several detectors share reads
# the same everywhere.
PHRASES: dict[str, tuple[str, Format]] = {
    # reward level and trend (collapse, stalled, no signal, zero spread)
    "best_reward": ("best reward", _number), "best_step": ("best reached at", _step),
    "recent_reward": ("recent reward", _number), "early_reward": ("reward at the start", _number),
    "share_of_gain_lost": ("share of the gain lost", _percent),
    "critical_from_share": ("critical from a loss of", _percent),
    "drop_in_noise_sigmas": ("drop, in noise σ", _number),
    "expected_drop_sigmas_below": ("a drop counts from (noise σ)", _number),
    "gain_in_noise_sigmas": ("gain, in noise σ", _signed),
    "expected_gain_sigmas_at_least": ("healthy gain at least (noise σ)", _number),
    "rank_trend_rho": ("trend over the steps (rank correlation, -1 to 1)", _signed),
    "significant_rho_above": ("a trend counts from (rank correlation)", _number),
    "constant_reward": ("reward constant at", _number),
    "pinned_reward": ("reward pinned at", _number),
    "reward_level": ("reward level", _number), "reward_range": ("reward range", _range),
    "reward_position_in_range": ("reward's place in its range", _percent),
    "kind": ("what it looks like", _kind),
    "frac_reward_zero_std_median": ("groups with no reward spread (median)", _percent),
    "zero_std_steps_median": ("steps with no reward spread (median)", _percent),
    "zero_spread_step_share": ("steps with no reward spread", _percent),
    "steps_with_spread": ("steps with some spread", _number),
    "second_half_share": ("share in the run's second half", _percent),
    "warning_from_share": ("a warning from a share of", _percent),
    "exact_signal": ("signal", _signal),
    "judged_from_rows": ("an exact signal needs at least", _rows),
    "rows": ("rows judged", _number), "points": ("logged steps judged", _number),
    # KL
    "baseline_kl": ("KL baseline", _number), "early_kl": ("KL at the start", _number),
    "recent_kl": ("recent KL", _number), "growth_factor": ("growth since the start", _times),
    "first_points_kl": ("KL at the first steps", _number),
    "expected_at_start_below": ("healthy at the start below", _number),
    "typical_kl": ("typical KL", _number), "sustained_steps": ("steps it has lasted", _number),
    "spike_count": ("spikes", _number), "largest_spikes": ("largest spikes", _spikes),
    "warning_from_count": ("a warning from (spikes)", _number),
    # entropy and length
    "early_entropy": ("entropy at the start", _number),
    "recent_entropy": ("recent entropy", _number),
    "ratio_to_early": ("ratio to the start", _times),
    "expected_ratio_above": ("healthy ratio above", _times),
    "expected_ratio_below": ("healthy ratio below", _times),
    "reward_improving": ("reward still improving", _number),
    "rows_at_each_end": ("rows compared at each end", _number),
    "short_run_rows": ("rows (a short run)", _number),
    "clipped_ratio_median": ("completions clipped (median)", _percent),
    "early_mean_length": ("mean length at the start", _number),
    "recent_mean_length": ("recent mean length", _number),
    "recent_mean_length_share_of_cap": ("recent mean length, share of the cap", _percent),
    "steps_at_cap_share": ("steps at the length cap", _percent),
    "max_completion_length": ("length cap (max_completion_length)", _number),
    "length_cap": ("length cap", _number), "length_grew": ("length grew", _number),
    "sudden": ("sudden", _number), "fall_logging_steps": ("fell within (logged steps)", _number),
    "truncation_disappeared": ("truncation disappeared", _number),
    # numbers that go wrong, memory
    "metric": ("metric", _number), "nonfinite_rows": ("NaN/inf rows", _number),
    "example_value": ("example value", _number),
    "typical_grad_norm": ("typical gradient norm", _number),
    "spike_steps_with_spread": ("spikes at steps with reward spread", _steps),
    "peak": ("peak", _number), "early_typical": ("typical at the start", _number),
    "threshold": ("threshold", _number), "buckets_above": ("stretches above it", _number),
    "expected_below": ("healthy below", _number), "expected": ("healthy", _number),
    "gpu": ("GPU", _number), "reserved_share_peak": ("memory reserved at the peak", _percent),
    "reserved_share_median": ("memory reserved (median)", _percent),
    "total_bytes": ("GPU memory", _bytes), "samples_above": ("samples above it", _number),
    "threshold_share": ("risky from", _percent),
    "consecutive_samples_needed": ("samples in a row needed", _number),
    "steps": ("at", _steps), "reserved_shares": ("reserved there", _shares),
    # rollouts
    "empty_frac_median": ("empty completions (median)", _percent),
    "identical_group_frac_median": ("groups of identical completions (median)", _percent),
    "repetition_median": ("repeated text (median)", _percent),
    # reward components (hacking, dead component)
    "component": ("reward component", _number), "constant_value": ("constant at", _number),
    "task_reward_at_floor": ("task reward at its floor", _number),
    "objective": ("objective", _number),
    "objective_is_monitor_only": ("objective is monitor-only (weight 0)", _number),
    "rising": ("rising", _moves), "falling": ("falling", _moves),
    "how": ("", _number), "change": ("change", _signed),
    "change_in_noise_sigmas": ("in noise σ", _signed),
    "change_in_own_range": ("share of its own range", _percent),
    "change_in_std_errors": ("in standard errors", _signed),
    "level_in_own_range": ("place in its own range", _percent),
    "min_change": ("smallest change that counts", _number),
    "window_start": ("window starts at", _step), "scaled_by": ("scaled by", _number),
    "persists_to_end": ("lasts to the end", _number),
    "rise_share_at_least": ("a rise counts from", _percent),
    "fall_share_at_least": ("a fall counts from", _percent),
    "explains_flat_total": ("explains a flat total reward", _number),
    # train vs eval
    "eval_change": ("eval reward change", _signed), "eval_points": ("eval points", _number),
    "eval_gain_in_noise_sigmas": ("eval gain, in noise σ", _signed),
    "eval_rank_trend_rho": ("eval trend (rank correlation)", _signed),
    "train_rank_trend_rho": ("train trend (rank correlation)", _signed),
    "train_rise_in_std_errors": ("train rise, in standard errors", _signed),
    # a lost run; escalation
    "seconds_since_last_report": ("time since the last report", _seconds),
    "expected_report_interval_s": ("usual report interval", _seconds),
    "warning_after_s": ("a warning after", _seconds),
    "escalated_to_critical": ("critical because", _number),
}
WORDS = {"kl": "KL", "gpu": "GPU", "rho": "rank correlation", "frac": "share",
         "std": "spread", "nonfinite": "NaN/inf", "s": "(s)", "median": "(median)",
         "sigmas": "σ", "pct": "%"}


def humanise(key: str) -> str:
    """A key no phrase names, in words: ``reward_std_zero_frac`` -> "reward spread zero
    share"; ``derived/x`` keeps its slash."""
    words = key.replace("_", " ").split()
    return " ".join(WORDS.get(w.lower(), w) for w in words) or key


# bounds with no unit of their own: they read in the unit of the finding's first number
# ("groups with no reward spread 100%; healthy below 80%", not "below 0.8")
BOUNDS = frozenset({"expected_below", "expected_at_start_below"})


def evidence_words(evidence: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(phrase, value in words) for each evidence item, in the detector's order."""
    items = list((evidence or {}).items())
    lead = PHRASES.get(str(items[0][0]), ("", _number))[1] if items else _number
    out = []
    for key, value in items:
        phrase, fmt = PHRASES.get(key, (humanise(str(key)), _number))
        if key in BOUNDS and lead is _percent:
            fmt = _percent
        out.append((phrase, fmt(value)))
    return out


def evidence_line(evidence: Mapping[str, Any] | None) -> str:
    """The evidence as one line of text (a pushed alert's "Evidence:")."""
    return "; ".join(f"{phrase}: {text}" if phrase else text
                     for phrase, text in evidence_words(evidence))
