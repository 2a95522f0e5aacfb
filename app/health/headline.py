"""A finding in one line for the run page: its key number in words, and its evidence as a
reader sees it.

The detectors' evidence is for the record (API, alerts, goldens): noise sigmas, rank-trend rho,
Python booleans. The run page leads with one number a person reads at a glance, per category,
and keeps the rest behind a nested "details".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# Per category, templates over the evidence, tried in order: the first that formats wins
# (detectors of one category report different evidence for different kinds of the problem).
KEY_NUMBERS: dict[str, tuple[str, ...]] = {
    "reward_collapse": ("reward {recent_reward} (best {best_reward} at step {best_step})",),
    "kl_blowup": ("KL {recent_kl}, {growth_factor}× its start", "KL {recent_kl}"),
    "kl_offset": ("KL {first_points_kl} at the first steps",),
    "kl_spike": ("{spike_count} spikes (typical KL {typical_kl})",),
    "entropy_collapse": ("entropy {recent_entropy} (was {early_entropy})",),
    "entropy_blowup": ("entropy {recent_entropy} (was {early_entropy})",),
    "length_explosion": ("{clipped_ratio_median:.0%} of completions clipped",
                         "mean length {recent_mean_length} (was {early_mean_length})",
                         "mean length {recent_mean_length} of {max_completion_length}"),
    "truncation": ("{clipped_ratio_median:.0%} of completions clipped",),
    "length_collapse": ("mean length {recent_mean_length} (was {early_mean_length})",),
    "zero_reward_spread": ("{frac_reward_zero_std_median:.0%} of groups with zero spread",),
    "stalled": ("reward {early_reward} → {recent_reward} over {points} logged steps",),
    "lost": ("no report for {seconds_since_last_report:.0f} s",),
    "numerical_instability": ("{nonfinite_rows} NaN/inf rows in {metric}",
                              "{spike_count} gradient-norm spikes"),
    "dead_reward_component": ("{component} constant at {constant_value}",),
    "oom_risk": ("{gpu} memory {reserved_share_peak:.0%} reserved",),
}


def key_number(category: str, evidence: Mapping[str, Any] | None) -> str | None:
    """The finding's one number in words, or None when its evidence has none to show."""
    values = {k: _Number(v) if isinstance(v, float) else v for k, v in (evidence or {}).items()}
    for template in KEY_NUMBERS.get(category, ()):
        try:
            return template.format_map(values)
        except (KeyError, ValueError, TypeError, IndexError):
            continue
    return None


class _Number(float):
    """A float that reads as three significant digits unless a template asks otherwise."""

    def __format__(self, spec: str) -> str:
        return format(float(self), spec or ".3g")


def plain(value: Any) -> str:
    """An evidence value as words: yes/no, not Python's True/False; lists without brackets."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {plain(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(plain(v) for v in value)
    return str(value)
