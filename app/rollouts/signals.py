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


def group_outcome(group: dict) -> str:
    """``all_pass`` / ``all_fail`` / ``mixed`` for the group-outcomes chart.

    The reward range is not known, so: totals with zero spread and a value > 0 are
    ``all_pass``; zero spread and a value <= 0 are ``all_fail`` (also when no completion could be
    scored: nothing was earned); any spread is ``mixed`` (the group teaches something)."""
    totals = [float(c["total"]) for c in group.get("completions") or []
              if c.get("total") is not None and math.isfinite(float(c["total"]))]
    if not totals:
        return "all_fail"
    lo, hi = min(totals), max(totals)
    if hi - lo > ZERO_SPREAD * max(1.0, abs(hi), abs(lo)):
        return "mixed"
    return "all_pass" if hi > 0 else "all_fail"
