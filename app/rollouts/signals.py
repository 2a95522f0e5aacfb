"""Per-step signals computed from captured rollout groups, plus the text rendering they share.

Pure functions (no DB, no torch): the server turns each captured step into metric rows named
``rollouts/*`` so degenerate completions show up in charts and diagnostics even when a run logs
no entropy. (How prompts and completions become text is ``grpodeck.contract.text``.)

Definitions (chosen to be robust on tiny or garbled outputs):
  * ``rollouts/identical_group_frac``: share of groups with >= 2 completions whose texts are all
    equal after stripping surrounding whitespace (a collapsed policy samples one answer).
  * ``rollouts/repetition``: mean over non-empty completions of ``1 - unique/total`` n-grams.
    Word 3-grams when a completion has >= 3 words; otherwise character 4-grams when it has >= 8
    non-space characters (catches "!!!!!!!!" or token soup without spaces); else 0.
  * ``rollouts/empty_frac``: share of completions that are empty or whitespace only.
"""

from __future__ import annotations

import math

ZERO_SPREAD = 1e-6  # totals closer than this (relative to their scale) count as equal
WORD_N, CHAR_N, MIN_CHARS = 3, 4, 8


def repetition(text: str) -> float:
    """Fraction of repeated n-grams in one completion (0 = no repeats, -> 1 = one loop)."""
    words = text.split()
    if len(words) >= WORD_N:
        grams = [tuple(words[i:i + WORD_N]) for i in range(len(words) - WORD_N + 1)]
    else:
        chars = "".join(words)
        if len(chars) < MIN_CHARS:
            return 0.0
        grams = [chars[i:i + CHAR_N] for i in range(len(chars) - CHAR_N + 1)]
    return 1.0 - len(set(grams)) / len(grams)


def _texts(group: dict) -> list[str]:
    return [str(c.get("text") or "") for c in group.get("completions") or []]


def step_signals(groups: list[dict]) -> dict[str, float]:
    """The ``rollouts/*`` metrics of one captured step (empty dict when nothing was captured)."""
    texts = [t for g in groups for t in _texts(g)]
    if not texts:
        return {}
    multi = [g for g in groups if len(_texts(g)) >= 2]
    identical = sum(len({t.strip() for t in _texts(g)}) == 1 for g in multi)
    non_empty = [t for t in texts if t.strip()]
    return {
        "rollouts/identical_group_frac": identical / len(groups),
        "rollouts/repetition": (sum(map(repetition, non_empty)) / len(non_empty)) if non_empty else 0.0,
        "rollouts/empty_frac": 1.0 - len(non_empty) / len(texts),
    }


def _finite(values: list[object]) -> list[float]:
    """The finite numbers among ``values`` (numeric strings such as "0.5" included)."""
    out = []
    for v in values:
        if v is None or isinstance(v, bool):
            continue
        try:
            number = float(v)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out.append(number)
    return out


def _spread(values: list[float]) -> float:
    """max - min, with differences below ZERO_SPREAD (relative to the scale) counted as 0."""
    lo, hi = min(values), max(values)
    return 0.0 if hi - lo <= ZERO_SPREAD * max(1.0, abs(hi), abs(lo)) else hi - lo


def component_spread(group: dict) -> float | None:
    """The largest spread of any one reward component across the group's completions (None
    when no component has a number): what can be said of a group sent without totals."""
    completions = group.get("completions") or []
    names = {name for c in completions for name in (c.get("rewards") or {})}
    spreads = [_spread(values) for name in names
               if (values := _finite([(c.get("rewards") or {}).get(name) for c in completions]))]
    return max(spreads) if spreads else None


def group_summary(group: dict) -> tuple[str, float | None]:
    """(outcome, reward spread) for the group-outcomes chart and the inspector's filters.

    When totals were sent (a ``total`` key, even null; or derived from the run's reward
    weights): zero spread and a value > 0 is ``all_pass``, zero spread and <= 0 ``all_fail``
    (also when no completion could be scored: nothing was earned), any spread ``mixed`` (the
    group teaches something); the spread is that of the totals.

    When no completion carries a ``total`` key (``log_rollouts`` with components only) the
    plain sum of the components is not assumed (their weights are unknown), so pass or fail
    cannot be told: the spread is the largest of any one component's; a group where some
    component varies is ``mixed`` (its completions were scored differently) and one where none
    does is ``no_total`` ("no total sent"), never ``all_fail``."""
    completions = group.get("completions") or []
    if completions and not any("total" in c for c in completions):
        spread = component_spread(group)
        return ("mixed" if spread else "no_total"), spread
    totals = _finite([c.get("total") for c in completions])
    if totals:
        spread = _spread(totals)
        if spread > 0:
            return "mixed", spread
        return ("all_pass" if max(totals) > 0 else "all_fail"), spread
    return "all_fail", None


def group_outcome(group: dict) -> str:
    """The outcome alone (see ``group_summary``)."""
    return group_summary(group)[0]
