"""What a column is, from the words of its name (and, where it helps, its values).

Why: a hand-written loop calls its reward ``rollout_reward_mean``, its spread
``rollout_reward_std``, its eval score ``val_accuracy``; listing every spelling in a vocabulary
table never ends, and a log none of whose keys is listed came out ``unknown``. A key no trainer
vocabulary names is split into words (``/ _ - . @``, spaces and camelCase, lowercased) and read
by the words it holds: ``reward`` with only words like ``mean``/``rollout``/``train`` around it
is the reward, with ``std`` its spread, with another word (``format_reward``) a reward component.

What is never done: a max, min, std, var, entropy, length, count, time or ratio column is
never read as the reward; a ``score`` needs a mean word (``avg_score``) to be the reward, and an
``accuracy`` stands for it only when the log has no reward column at all (a bare ``Score`` could
be anything: the user names it with ``--map``). A column logged on fewer than half the rows of a
long enough log (``val_accuracy`` null except on eval steps) is an eval series. One key per
canonical name: eval scores are ranked reward > accuracy > score > other metrics.

Used by ``app.metrics.reading`` for every path (live batches, imports, ``grpodeck diagnose``),
after the trainer vocabulary and the user's mapping, onto names nothing else claimed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from app.metrics.names import EVAL_PREFIX, Row, canonical_name

# --- what is already a canonical name (TRL's newest vocabulary): left as it is ------------------
TRL_NAMES = frozenset({
    "reward", "reward_std", "frac_reward_zero_std", "kl", "entropy", "loss", "grad_norm",
    "learning_rate", "epoch", "num_tokens", "step_time", "clip_ratio",
    "reward_max", "reward_min",  # the batch's best and worst reward (the zero-spread check)
    "runtime", "samples_per_second", "steps_per_second",  # eval_runtime & co (TRL's eval)
})
TRL_PREFIXES = ("completions/", "rewards/", "clip_ratio/", "sampling/", "objective/", "system/")

# --- words -----------------------------------------------------------------------------------------
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^0-9a-zA-Z]+")  # / _ - . @ spaces, and anything else not a letter

EVAL_WORDS = frozenset({"eval", "evaluation", "val", "valid", "validation", "test", "dev",
                        "heldout", "holdout"})
REWARD_WORDS = frozenset({"reward", "rewards", "rew"})
SCORE_WORDS = frozenset({"score", "scores"})
ACCURACY_WORDS = frozenset({"accuracy", "acc"})
# what eval metrics are called when they are neither a reward, an accuracy nor a score
EVAL_METRIC_WORDS = frozenset({"pass", "ndcg", "mrr", "f1", "em", "exact", "match", "bleu",
                               "rouge", "success", "solve", "solved", "win", "winrate",
                               "correct", "recall", "precision"})
# what an eval column holds when it is not a score (the eval's own bookkeeping)
NOT_A_SCORE = frozenset({"epoch", "runtime", "step", "steps", "samples", "sampled", "size",
                         "penalty", "repetition", "duplicate", "unique", "memory", "mem"})
MEAN_WORDS = frozenset({"mean", "avg", "average"})
# words around a total that do not make it something else: ``rollout_reward_mean`` is the reward
QUALIFIERS = MEAN_WORDS | frozenset({"train", "training", "rollout", "rollouts", "batch", "total",
                                     "overall", "episode", "policy", "sample", "samples", "group",
                                     "all", "per", "step", "actor", "critic", "grpo", "ppo", "pg",
                                     "raw"})
SPREAD_WORDS = frozenset({"std", "stdev", "sd"})
EXTREME_WORDS = frozenset({"max", "min"})
# a summary other than the mean: never the metric itself (a max reward is not the reward)
NOT_A_MEAN = SPREAD_WORDS | frozenset({"max", "min", "var", "variance", "median", "sum", "count",
                                       "num", "n", "cnt", "p50", "p90", "p95", "p99"})
# words that make a column something other than a reward, whatever else it says
NOT_A_REWARD = frozenset({"entropy", "ent", "length", "len", "lengths", "lens", "time",
                          "seconds", "sec", "secs", "s", "ms", "duration", "timing", "ratio",
                          "frac", "fraction", "rate", "percent", "pct", "loss", "kl", "lr",
                          "norm", "grad", "gradient", "token", "tokens", "adv", "advantage",
                          "advantages", "value", "values", "baseline", "coef", "coeff",
                          "weight", "beta", "zero", "nonzero", "threshold", "clip", "clipped",
                          "model"})
COEFFICIENT_WORDS = frozenset({"coef", "coeff", "coefficient", "beta", "ctl", "target",
                               "weight", "percent", "pct"})
LENGTH_WORDS = frozenset({"length", "len", "lengths", "lens"})
NOT_A_COMPLETION = frozenset({"prompt", "prompts", "input", "query", "context", "seq",
                              "sequence", "ref"})
COMPLETION_WORDS = frozenset({"completion", "completions", "response", "responses", "resp",
                              "gen", "generation", "generated", "output", "answer"})
CLIP_WORDS = frozenset({"clip", "clipped", "clipping"})
TOTAL_WORDS = frozenset({"total", "cumulative", "sum", "num", "count", "n"})
TRUNCATION_WORDS = frozenset({"truncated", "truncation", "trunc", "overlong"})
RATIO_WORDS = frozenset({"ratio", "frac", "fraction", "rate"})
SHARE_WORDS = frozenset({"share", "dominance", "proportion"})
# groups whose rewards are all equal (no advantage): TRL's frac_reward_zero_std
NO_SPREAD_WORDS = frozenset({"std", "adv", "advantage", "spread", "variance"})
GRAD_NORM_SPELLINGS = frozenset({"gradnorm", "gnorm", "gradn", "gradientnorm"})

# --- ranks: when several keys could take one name, the lowest rank wins (then the key's order) -
REWARD_RANK, ACCURACY_RANK, SCORE_RANK, OTHER_RANK, UNNAMED_RANK = 0, 1, 2, 3, 4
# a train accuracy stands for the reward only when no reward column exists
FALLBACK_RANK = 10

# --- values ----------------------------------------------------------------------------------------
SPARSE_SHARE = 0.5  # logged on fewer than this share of the rows: an eval series ...
MIN_ROWS_TO_CALL_SPARSE = 8  # ... judged only on a log long enough to tell
# the range a role's values must stay in (None: unbounded); a "ratio" of 3.0 is no ratio
RANGES: dict[str, tuple[float | None, float | None]] = {
    "completions/clipped_ratio": (0.0, 1.0),
    "frac_reward_zero_std": (0.0, 1.0),
    "completions/mean_length": (0.0, None),
    "completions/max_length": (0.0, None),
    "completions/min_length": (0.0, None),
    "grad_norm": (0.0, None),
    "learning_rate": (0.0, 1.0),
}


@dataclass(frozen=True)
class Column:
    """What the values say about one column: on how many rows it was logged, and its range."""

    rows: int
    low: float
    high: float


@dataclass(frozen=True)
class Candidate:
    """A key's inferred name, and its rank among keys that could take the same name."""

    name: str
    rank: int


def words(key: str) -> tuple[str, ...]:
    """``rollout_reward_mean`` -> (rollout, reward, mean); ``avgScore`` -> (avg, score);
    ``val/pass@1`` -> (val, pass, 1); ``KL%`` -> (kl, percent)."""
    spaced = _CAMEL.sub(" ", key.replace("%", " percent "))
    return tuple(w.lower() for w in _SEPARATORS.split(spaced) if w)


def is_canonical(key: str) -> bool:
    """A name already in TRL's newest vocabulary (``eval_`` ones too): never renamed."""
    name = key.removeprefix(EVAL_PREFIX)
    return name in TRL_NAMES or name.startswith(TRL_PREFIXES)


def columns(rows: list[Row], keys: AbstractSet[str]) -> tuple[dict[str, Column], int]:
    """({key: its Column}, number of rows) for ``keys``, from rows already read (one pass,
    no copy of the values)."""
    found: dict[str, Column] = {}
    for _, metrics in rows:
        for key in keys & metrics.keys():
            value = metrics[key]
            if math.isnan(value):  # NaN says nothing about a range
                continue
            seen = found.get(key)
            found[key] = Column(1, value, value) if seen is None else Column(
                seen.rows + 1, min(seen.low, value), max(seen.high, value))
    return found, len(rows)


# --- one key's role ---------------------------------------------------------------------------------

def _component(key: str, spread: bool) -> str:
    """``format_reward`` -> ``rewards/format_reward/mean`` (the key is the component's name,
    without a trailing mean word and without path parts like ``train/`` or ``reward/``:
    ``reward/f`` -> ``rewards/f/mean``; ``_std`` makes it the spread)."""
    stem = re.sub(r"[_/.\-]?(mean|avg|average|std|stdev)$", "", key, flags=re.IGNORECASE)
    parts = [p for p in stem.split("/") if not set(words(p)) <= QUALIFIERS | REWARD_WORDS]
    return f"rewards/{'_'.join(parts) or stem}/{'std' if spread else 'mean'}"


def _reward_role(key: str, ws: set[str]) -> Candidate | None:
    """The reward, its spread, the batch's best or worst reward, or a component, from a key
    holding a reward word."""
    others = ws - REWARD_WORDS - QUALIFIERS - SPREAD_WORDS
    spread = bool(ws & SPREAD_WORDS)
    if ws & NOT_A_REWARD or ws & EVAL_WORDS:
        return None
    if extreme := _extreme(ws, others):
        return Candidate(extreme, REWARD_RANK)
    if ws & (NOT_A_MEAN - SPREAD_WORDS):
        return None
    if others:
        return Candidate(_component(key, spread), REWARD_RANK)
    return Candidate("reward_std" if spread else "reward", REWARD_RANK)


def _extreme(ws: set[str], others: set[str]) -> str | None:
    """``rollout_reward_max`` -> ``reward_max`` (``_min`` likewise): the batch's best and worst
    reward, equal when every completion scored the same (what the zero-spread check reads);
    never the reward itself. None for anything else (a component's max stays as it is)."""
    extremes = ws & EXTREME_WORDS
    if len(extremes) != 1 or others - EXTREME_WORDS or ws & (NOT_A_MEAN - EXTREME_WORDS):
        return None
    return f"reward_{extremes.pop()}"


def _score_role(ws: set[str]) -> Candidate | None:
    """A score or an accuracy as the reward: a score with a mean word, an accuracy only as the
    fallback (no reward column in the log)."""
    if ws & (NOT_A_REWARD | NOT_A_MEAN) or ws - QUALIFIERS - SCORE_WORDS - ACCURACY_WORDS:
        return None
    if ws & ACCURACY_WORDS:
        return Candidate("reward", FALLBACK_RANK)
    return Candidate("reward", SCORE_RANK) if ws & MEAN_WORDS else None


def _eval_rank(ws: set[str], unnamed: bool = False) -> int | None:
    """How good an eval column is as the eval score (None: not a score). ``unnamed``: a column
    named after its data set only (slime's ``eval/math``) counts, last."""
    if ws & (NOT_A_REWARD | NOT_A_MEAN | NOT_A_SCORE):
        return None
    for found, rank in ((REWARD_WORDS, REWARD_RANK), (ACCURACY_WORDS, ACCURACY_RANK),
                        (SCORE_WORDS, SCORE_RANK), (EVAL_METRIC_WORDS, OTHER_RANK)):
        if ws & found:
            return rank
    return UNNAMED_RANK if unnamed and ws else None


def _length_role(ws: set[str]) -> str | None:
    """A completion length: ``mean_response_length``, ``max_response_len``, and tokens of a
    completion (``completion_tokens``; a total or a cumulative count of them is no length)."""
    tokens = bool(ws & {"token", "tokens"} and ws & COMPLETION_WORDS)
    if not (ws & LENGTH_WORDS or tokens) or ws & (NOT_A_COMPLETION | SPREAD_WORDS | RATIO_WORDS
                                                 | CLIP_WORDS | TOTAL_WORDS):
        return None
    for word, name in (("max", "completions/max_length"), ("min", "completions/min_length")):
        if word in ws:
            return name
    return None if ws & NOT_A_MEAN else "completions/mean_length"


def _ratio_role(ws: set[str]) -> str | None:
    """Truncated completions: ``truncated_frac``, ``completion_clip_ratio``; the policy's PPO
    clip ratio (``clip_ratio`` alone) is not about completions and is left alone."""
    if not ws & RATIO_WORDS or ws & (NOT_A_MEAN - SPREAD_WORDS):
        return None
    if ws & TRUNCATION_WORDS or (ws & CLIP_WORDS and ws & (COMPLETION_WORDS | LENGTH_WORDS)):
        return "completions/clipped_ratio"
    if "degenerate" in ws or ("zero" in ws and ws & NO_SPREAD_WORDS):
        return "frac_reward_zero_std"
    return None


def _other_role(ws: set[str], joined: str) -> str | None:
    """KL, entropy, grad norm, learning rate, loss: the roles a word or two names."""
    if joined in GRAD_NORM_SPELLINGS:  # before the words: GradN's N is no count
        return "grad_norm"
    if ws & (NOT_A_MEAN | COEFFICIENT_WORDS):
        return None
    if "lr" in ws or {"learning", "rate"} <= ws:
        return "learning_rate"
    if ws & (RATIO_WORDS | SHARE_WORDS):  # kl_dominance_ratio: a share of the loss, not a KL
        return None
    if "kl" in ws or joined in ("kldiv", "kldivergence"):
        return "kl"
    if ws & {"entropy", "ent"}:
        return "entropy"
    if ws & {"grad", "gradient"} and "norm" in ws:
        return "grad_norm"
    if "loss" in ws and not ws - QUALIFIERS - {"loss", "objective"}:
        return "loss"
    return None


def _train_role(key: str, ws: set[str]) -> Candidate | None:
    """A train column's role: the first rule its words fit."""
    if ws & REWARD_WORDS:
        return _reward_role(key, ws)
    if ws & (SCORE_WORDS | ACCURACY_WORDS):
        return _score_role(ws)
    joined = "".join(w for w in words(key) if w in ws)
    name = _ratio_role(ws) or _length_role(ws) or _other_role(ws, joined)
    return Candidate(name, REWARD_RANK) if name else None


def _eval_role(key: str, ws: set[str]) -> Candidate | None:
    """An eval column: the eval score (ranked), its spread, or ``eval_`` + a train role."""
    rest = ws - EVAL_WORDS
    if rest & REWARD_WORDS and rest & SPREAD_WORDS and not rest - REWARD_WORDS - QUALIFIERS \
            - SPREAD_WORDS:
        return Candidate("eval_reward_std", REWARD_RANK)
    role = _train_role(key, rest)
    # every eval reward competes for eval_reward: in ``val-aux/aime_2024/reward/best@16/mean``
    # the extra words name a data set and a pick, not a reward component
    rank = _eval_rank(rest, unnamed=role is None)
    if rank is not None:
        return Candidate("eval_reward", rank)
    if role is None or role.name.startswith("reward"):
        return None
    return Candidate(EVAL_PREFIX + role.name, role.rank)


def candidate(key: str, column: Column | None = None, rows: int = 0) -> Candidate | None:
    """The name ``key`` could be read as, or None (left as it is)."""
    if is_canonical(key):
        return None
    if (spelled := _spelled_canonical(key)) is not None:
        return Candidate(spelled, REWARD_RANK)
    ws = set(words(key))
    is_eval = bool(ws & EVAL_WORDS) or key.startswith(EVAL_PREFIX)
    found = _eval_role(key, ws) if is_eval else _train_role(key, ws)
    if not is_eval and _sparse(column, rows) and not ws & REWARD_WORDS:
        rank = _eval_rank(ws)
        if rank is not None:  # an accuracy or a score logged only now and then: eval
            return Candidate("eval_reward", rank)
    if found is None or not _in_range(found.name, column):
        return None
    return found


def _spelled_canonical(key: str) -> str | None:
    """A canonical name under a tracker's or a table's spelling, else None: the Trainer's
    ``train/`` and ``eval/`` prefixes (``train/rewards/acc`` in a W&B export) and a table
    header's spaces (``rewards / f / mean``), kept verbatim in a JSON row."""
    name = re.sub(r"\s*/\s*", "/", key.strip())
    if name.startswith("train/"):
        name = name.removeprefix("train/")
    elif name.startswith("eval/"):
        name = EVAL_PREFIX + name.removeprefix("eval/")
    name = canonical_name(name)
    return name if name != key and is_canonical(name) else None


def _sparse(column: Column | None, rows: int) -> bool:
    return (column is not None and rows >= MIN_ROWS_TO_CALL_SPARSE
            and column.rows < SPARSE_SHARE * rows)


def _in_range(name: str, column: Column | None) -> bool:
    low, high = RANGES.get(name, (None, None))
    if column is None:
        return True
    return (low is None or column.low >= low) and (high is None or column.high <= high)


# --- a log's keys -----------------------------------------------------------------------------------

def infer(keys: Iterable[str], taken: AbstractSet[str] = frozenset(),
          stats: Mapping[str, Column] | None = None, rows: int = 0) -> dict[str, str]:
    """{key: inferred canonical name} for ``keys``, onto names not in ``taken`` (what the log
    already has, or a vocabulary or the user gave), one key per name: the best rank, then the
    earliest key in sorted order. A train accuracy is the reward only when ``taken`` and the
    keys hold no reward (total or component)."""
    stats = stats or {}
    found = {k: c for k in sorted(keys)
             if (c := candidate(k, stats.get(k), rows)) is not None}
    has_reward = any(_is_reward(n) for n in taken) or any(
        _is_reward(c.name) and c.rank < FALLBACK_RANK for c in found.values())
    options: dict[str, list[tuple[int, str]]] = {}  # name -> [(rank, key)]
    for key, cand in found.items():
        if cand.name in taken or (cand.rank == FALLBACK_RANK and has_reward):
            continue
        options.setdefault(cand.name, []).append((cand.rank, key))
    return {min(ranked)[1]: name for name, ranked in options.items()}


def _is_reward(name: str) -> bool:
    name = canonical_name(name)
    return name == "reward" or (name.startswith("rewards/") and name.endswith("/mean"))
