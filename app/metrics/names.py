"""Canonical metric names across TRL versions.

TRL renamed several GRPO metrics over time (``completion_length`` ->
``completions/mean_length``, ``rewards/<f>`` -> ``rewards/<f>/mean``, ...). Everything
downstream (diagnostics, charts, comparisons) speaks only the newest vocabulary, so
importers and the live metric path both pass rows through :func:`normalize_row`. Other
trainers' names (verl, OpenRLHF) and a user's mapping are applied on top, the same way on
every path, by ``app.metrics.reading``.
"""

from __future__ import annotations

import math
from fnmatch import fnmatchcase
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


# A row's keys, in order -> their canonical names, when renaming them is plain (every key a str,
# no old spelling, no two keys to one name): a run's rows repeat one key tuple, and a Python
# step per key was a fifth of the report handler (issue 57).
_PLANS: dict[tuple[str, ...], tuple[str, ...]] = {}
_MAX_PLANS = 10_000
_FLOAT = {float}


def normalize_row(metrics: dict) -> dict[str, float]:
    """Canonical names and float values for one logged row; non-numeric values are dropped.

    When an old and a new spelling of the same metric are both present, the new spelling
    wins regardless of key order.
    """
    keys = tuple(metrics)
    plan = _PLANS.get(keys)
    if plan is not None and set(map(type, metrics.values())) == _FLOAT:  # C loops only
        return dict(zip(plan, metrics.values(), strict=True))
    out = _normalized(metrics)
    if plan is None and len(_PLANS) < _MAX_PLANS and len(out) == len(keys) and all(
            type(k) is str and not _key(k)[1] for k in keys):
        _PLANS[keys] = tuple(_key(k)[0] for k in keys)
    return out


def _normalized(metrics: dict) -> dict[str, float]:
    """``normalize_row`` key by key."""
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


# Other trainers' vocabularies: their key -> our canonical name, in priority order (when two
# keys of a log map to the same name, the earlier one wins; the other keeps its own name).
# ``*`` patterns match several keys (the first present one, in sorted order, is used).
# verl: RayPPOTrainer's metrics (verl/trainer/ppo/metric_utils.py); ``critic/score`` is the task
# score before any KL penalty, ``critic/rewards`` the same with an in-reward KL penalty.
# OpenRLHF: the PPO/GRPO trainer's status dict (its wandb logger prefixes ``train/``).
VOCABULARIES: dict[str, dict[str, str]] = {
    "verl": {
        "critic/score/mean": "reward",
        "critic/rewards/mean": "reward",
        # the spread of the same score across the batch: what the zero-spread check reads
        "critic/score/std": "reward_std",
        "critic/rewards/std": "reward_std",
        # the batch's best and worst score: equal means every completion scored the same
        "critic/score/max": "reward_max",
        "critic/score/min": "reward_min",
        "actor/entropy": "entropy",
        "actor/entropy_loss": "entropy",
        "actor/kl_loss": "kl",
        "critic/kl": "kl",
        "actor/pg_loss": "loss",
        "actor/grad_norm": "grad_norm",
        "actor/lr": "learning_rate",
        "actor/pg_clipfrac": "clip_ratio/region_mean",
        "response_length/mean": "completions/mean_length",
        "response_length/max": "completions/max_length",
        "response_length/min": "completions/min_length",
        "response_length/clip_ratio": "completions/clipped_ratio",
        "timing_s/step": "step_time",
        "val-core/*/reward/mean@*": "eval_reward",
        "val/test_score/*": "eval_reward",
    },
    "openrlhf": {
        "train/reward": "reward",
        "train/kl": "kl",
        "train/policy_entropy": "entropy",
        "train/response_length": "completions/mean_length",
        "train/policy_loss": "loss",
        "train/raw_grad_norm": "grad_norm",
        "train/actor_lr": "learning_rate",
        "eval/reward": "eval_reward",
        "policy_entropy": "entropy",
        "response_length": "completions/mean_length",
        "policy_loss": "loss",
        "raw_grad_norm": "grad_norm",
        "actor_lr": "learning_rate",
    },
    # Hand-written loops: the spellings people print (``GRPO step 12 | mean_reward: 0.3 | KL:
    # 0.01``). Applied only when no trainer above is recognised.
    "loop": {
        "mean_reward": "reward",
        "avg_reward": "reward",
        "reward_mean": "reward",
        "average_reward": "reward",
        "Reward": "reward",
        "Rewards": "reward",
        "rewards": "reward",
        "std_reward": "reward_std",
        "max_reward": "reward_max",
        "min_reward": "reward_min",
        "Reward_std": "reward_std",
        "Rewards_std": "reward_std",
        "rewards_std": "reward_std",
        "KL": "kl",
        "kl_div": "kl",
        "kl_divergence": "kl",
        "KL_ref": "kl",
        "kl_ref": "kl",
        "mean_kl": "kl",
        "avg_kl": "kl",
        "Entropy": "entropy",
        "mean_entropy": "entropy",
        "avg_entropy": "entropy",
        "resp_len": "completions/mean_length",
        "response_len": "completions/mean_length",
        "avg_len": "completions/mean_length",
        "avg_length": "completions/mean_length",
        "mean_len": "completions/mean_length",
        "Loss": "loss",
        "lr": "learning_rate",
        "LR": "learning_rate",
        "gnorm": "grad_norm",
    },
}
_VERL_PREFIXES = ("critic/", "actor/", "response_length/", "timing_s/", "val-core/")
_OPENRLHF_MARKS = frozenset({"policy_loss", "train/policy_loss"})
_OPENRLHF_WITH = frozenset({"response_length", "train/response_length", "return", "train/return"})


def detect_vocabulary(keys: set[str] | frozenset[str]) -> str | None:
    """Which trainer wrote these keys: "verl", "openrlhf", "loop" (a hand-written loop's
    spellings), or None (TRL or unknown)."""
    if any(k.startswith(_VERL_PREFIXES) for k in keys):
        return "verl"
    if keys & _OPENRLHF_MARKS and keys & _OPENRLHF_WITH:
        return "openrlhf"
    if keys & VOCABULARIES["loop"].keys():
        return "loop"
    return None


def parse_mapping(items: list[str] | tuple[str, ...] | str | None) -> dict[str, str]:
    """``["Reward=reward", "KL_ref=kl"]`` (or one string, comma- or newline-separated) ->
    ``{"Reward": "reward", "KL_ref": "kl"}``; raises ValueError naming a malformed item, or
    two keys sent to one name (one of them would be dropped without a word)."""
    if isinstance(items, str):
        items = [p for line in items.splitlines() for p in line.split(",")]
    out: dict[str, str] = {}
    for item in items or []:
        if not item.strip():
            continue
        key, sep, name = item.partition("=")
        if not sep or not key.strip() or not name.strip():
            raise ValueError(f"{item.strip()!r} is not KEY=NAME (e.g. Reward=reward)")
        out[key.strip()] = canonical_name(name.strip())
    return _one_key_per_name(out)


def _one_key_per_name(mapping: dict[str, str]) -> dict[str, str]:
    """``mapping`` when no two keys share a name, else ValueError naming them."""
    keys_of: dict[str, list[str]] = {}
    for key, name in mapping.items():
        keys_of.setdefault(name, []).append(key)
    for name, keys in keys_of.items():
        if len(keys) > 1:
            raise ValueError(f"{' and '.join(repr(k) for k in keys)} both map to {name!r}: "
                             "map one key to each name")
    return mapping


def resolve_table(table: dict[str, str], keys: set[str]) -> dict[str, str]:
    """{present key: canonical name}, one key per name (the earliest in ``table``)."""
    chosen: dict[str, str] = {}
    taken: set[str] = set()
    for pattern, name in table.items():
        hits = sorted(k for k in keys if fnmatchcase(k, pattern)) if "*" in pattern \
            else ([pattern] if pattern in keys else [])
        if hits and name not in taken:
            chosen[hits[0]] = name
            taken.add(name)
    return chosen


def rename_rows(rows: list[Row], renames: dict[str, str]) -> list[Row]:
    """Rows with keys renamed; a renamed key replaces what the row had under the new name."""
    if not renames:
        return rows
    out = []
    for step, metrics in rows:
        moved = {renames[k]: v for k, v in metrics.items() if k in renames}
        kept = {k: v for k, v in metrics.items() if k not in renames and k not in moved}
        out.append((step, {**kept, **moved}))
    return out
