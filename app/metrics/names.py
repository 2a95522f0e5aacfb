"""Canonical metric names across TRL versions.

TRL renamed several GRPO metrics over time (``completion_length`` ->
``completions/mean_length``, ``rewards/<f>`` -> ``rewards/<f>/mean``, ...). Everything
downstream (diagnostics, charts, comparisons) speaks only the newest vocabulary, so
importers and the live metric path both pass rows through :func:`normalize_row`.
"""

from __future__ import annotations

import math
from functools import lru_cache

from grpodeck.contract.fields import cleaned

EVAL_PREFIX = "eval_"

# Old name -> newest name (without the eval_ prefix).
_RENAMES: dict[str, str] = {
    "completion_length": "completions/mean_length",
    "clipped_ratio": "completions/clipped_ratio",
    "mean_length": "completions/mean_length",
    "min_length": "completions/min_length",
    "max_length": "completions/max_length",
    "mean_terminated_length": "completions/mean_terminated_length",
    "min_terminated_length": "completions/min_terminated_length",
    "max_terminated_length": "completions/max_terminated_length",
}

# Canonical names whose value should win when an old and a new spelling share a row
# (TRL versions that logged both, e.g. telelogs: completion_length differs from
# completions/mean_length; the README says prefer the latter).
_NEW_SPELLINGS = frozenset(_RENAMES.values())


@lru_cache(maxsize=4096)
def canonical_name(name: str) -> str:
    """Map any TRL spelling of a metric to the newest one; the ``eval_`` prefix is kept."""
    name = name.strip()
    prefix = ""
    if name.startswith(EVAL_PREFIX):
        prefix, name = EVAL_PREFIX, name[len(EVAL_PREFIX):]
    if name in _RENAMES:
        return prefix + _RENAMES[name]
    if name.startswith("rewards/"):
        parts = name.split("/")
        # rewards/<f> (old bare mean) -> rewards/<f>/mean; rewards/<f>/{mean,std} unchanged.
        if len(parts) == 2 and parts[1]:
            return f"{prefix}rewards/{parts[1]}/mean"
    return prefix + name



def to_float(value: object) -> float | None:
    """Numeric value of a logged metric, or None when it is not a number.

    Accepts ints, floats and numeric strings ("0.5", "nan", "inf"); keeps NaN/inf because
    numerical-instability detection needs them. Booleans are not metrics.
    """
    t = type(value)
    if t is float:
        return value  # type: ignore[return-value]
    if t is int:
        try:
            return float(value)  # type: ignore[arg-type]
        except OverflowError:  # an integer beyond 1.8e308, like JSON's 1e400, is infinite
            return math.inf if value > 0 else -math.inf  # type: ignore[operator]
    if t is bool or value is None:
        return None
    if isinstance(value, int):
        return to_float(int(value))
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    try:  # numpy scalars and the like
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f if isinstance(f, float) else None


Row = tuple[int, dict[str, float]]  # (step, canonical metric name -> value)


_KEYS: dict[str, tuple[str, bool]] = {}  # raw key -> (canonical name, is an old spelling)
_MAX_KEYS = 100_000  # a stream of ever-new keys must not grow this without bound


def _key(raw_key: str) -> tuple[str, bool]:
    """(canonical name, whether ``raw_key`` is an old spelling), computed once per key: every
    row of a run repeats the same few dozen keys."""
    known = _KEYS.get(raw_key)
    if known is not None:
        return known
    # an imported log's keys may hold NUL or lone surrogates, which no database stores
    key = raw_key if raw_key.isascii() and "\x00" not in raw_key else cleaned(raw_key)
    name = canonical_name(key)
    known = (name, name != key.strip())
    if len(_KEYS) < _MAX_KEYS:
        _KEYS[raw_key] = known
    return known


def normalize_row(metrics: dict) -> dict[str, float]:
    """Canonical names and float values for one logged row; non-numeric values are dropped.

    When an old and a new spelling of the same metric are both present, the new spelling
    wins regardless of key order.
    """
    out: dict[str, float] = {}
    from_old: set[str] = set()
    for raw_key, value in metrics.items():
        if type(value) is float:  # what JSON numbers mostly are: no conversion to try
            v = value
        else:
            v = to_float(value)
            if v is None:
                continue
        if type(raw_key) is not str:
            if not isinstance(raw_key, str):
                continue
            raw_key = str(raw_key)
        name, old = _key(raw_key)
        if old:
            if name in out and name not in from_old:
                continue  # the new spelling is already there: keep it
            from_old.add(name)
        elif from_old:
            from_old.discard(name)
        out[name] = v
    return out
