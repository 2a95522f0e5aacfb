"""Per-step rows from a list of dicts (JSON list, JSON Lines, a CSV's rows): where each row's
step comes from, and which rows are eval rows.

Why infer: a hand-written loop writes its step as ``grpo_step`` or ``iteration`` (or not at
all) and marks its rows ``{"type": "rollout" | "train" | "eval", ...}``; a reader that wanted a
``step`` key refused the whole log. The step comes from, in order:

1. the key the user named (``--map grpo_step=step``);
2. ``step``, ``global_step`` or ``train/global_step``, as before (every row must have it);
3. a column that behaves like a step: a step-like name (``grpo_step``, ``iteration``, ``iter``,
   ``update``, ``_step``, ``..._step``), in every row, whole numbers that never go down;
4. the row order: the n-th train row is step n, an eval row belongs to the step before it
   (only for two rows or more: one dict is a config or a summary, not a run).

``meta["step_from"]`` says which when it is not one of (2) (``"grpo_step"``, ``"row order"``).

Eval rows: a ``type``/``split``/``phase``/``mode``/``stage`` field whose value is eval-like
(``eval``, ``val``, ``validation``, ``test``...), or a true ``eval``/``is_eval`` flag. Their keys
become ``eval_<key>`` (``reward_mean`` -> ``eval_reward_mean``, read as ``eval_reward``), so
TRL's names and the reward checks apply; train and rollout rows merge at their step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import pairwise

from app.importers.base import STEP_KEYS, LogFormatError, is_summary_row, step_pairs
from app.metrics.inference import words
from app.metrics.names import EVAL_PREFIX

Labelled = tuple[str, dict]  # (where the row is, e.g. "line 3", the row)
Pair = tuple[int, dict]

ROW_ORDER = "row order"
MIN_ROWS_FOR_ORDER = 2  # one dict without a step is a config or a summary, not a run
MAX_STEP_DIGITS = 20  # a longer number is no step (and int() refuses past 4300 digits)
# step-like names, best first: a log with several takes the first that behaves like a step
STEP_NAMES = ("_step", "grpo_step", "iteration", "iter", "update", "updates", "steps",
              "train_step", "global_iteration", "trainer/global_step")
STEP_WORDS = frozenset({"step", "steps", "iter", "iteration", "update", "updates"})
MARKER_KEYS: tuple[str, ...] = ("type", "split", "phase", "mode", "stage", "kind", "subset")
EVAL_VALUES = frozenset({"eval", "evaluation", "val", "valid", "validation", "test", "testing",
                         "dev", "heldout", "holdout"})
EVAL_FLAGS: tuple[str, ...] = ("eval", "is_eval", "is_val", "is_validation", "validation", "is_test")
# a key an eval row already prefixes: ``val_loss`` in an eval row is ``eval_loss``
EVAL_KEY_PREFIXES = ("eval_", "eval/", "val_", "val/", "valid_", "validation_", "validation/",
                     "test_", "test/")


def rows_of(labelled: Iterable[tuple[str, object]], path: str,
            step_key: str | None = None) -> tuple[list[Pair], dict]:
    """(step, row) pairs with eval rows' keys prefixed, and the meta that says where steps
    came from; raises LogFormatError naming the row that has no step."""
    rows = [(label, e) for label, e in labelled if isinstance(e, dict) and not is_summary_row(e)]
    meta: dict = {}
    if not rows:  # nothing but summaries: the caller says the file holds no metric rows
        return [], meta
    if step_key is not None:
        pairs = _from_key(rows, step_key, path)
        meta["step_from"] = step_key
    elif any(key in e for _, e in rows for key in STEP_KEYS):
        pairs = step_pairs(rows, path)
    elif (found := step_column([e for _, e in rows])) is not None:
        pairs = _from_key(rows, found, path)
        meta["step_from"] = found
    elif len(rows) >= MIN_ROWS_FOR_ORDER:
        pairs = _in_order([e for _, e in rows])
        meta["step_from"] = ROW_ORDER
    else:
        raise LogFormatError(path, f"{rows[0][0]} has no 'step'")
    eval_rows = sum(is_eval_row(e) for _, e in pairs)
    if eval_rows:
        meta["eval_rows"] = eval_rows
    return split_eval_rows(pairs), meta


def step_column(rows: list[dict]) -> str | None:
    """The key that behaves like a step in ``rows``: a step-like name, in every row, whole
    numbers that never go down; None when none does."""
    if not rows:
        return None
    shared = set(rows[0]).intersection(*rows[1:])
    named = [k for k in STEP_NAMES if k in shared]
    named += sorted(k for k in shared if k not in named and _step_like(k))
    return next((k for k in named if _behaves_like_a_step([r[k] for r in rows])), None)


def _step_like(key: str) -> bool:
    """``optimizer_step``, ``PPO iteration``: the last word says step (``time_per_step``'s
    values, fractions, are not whole numbers and fail the value test)."""
    ws = words(key)
    return bool(ws) and ws[-1] in STEP_WORDS


def _behaves_like_a_step(values: list[object]) -> bool:
    steps = [_whole(v) for v in values]
    return all(s is not None for s in steps) and all(
        a <= b for a, b in pairwise(steps))  # type: ignore[operator]


def _whole(value: object) -> int | None:
    """A whole-number step value (``3``, ``3.0``, ``"3"``), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value.lstrip("-").isdigit() or len(value) > MAX_STEP_DIGITS:
            return None
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


def _from_key(rows: list[Labelled], key: str, path: str) -> list[Pair]:
    """Each row at its ``key``; a row without a whole number there is refused by name."""
    pairs = []
    for label, entry in rows:
        step = _whole(entry.get(key))
        if step is None:
            raise LogFormatError(path, f"{label} has no {key!r}")
        pairs.append((step, {k: v for k, v in entry.items() if k != key}))
    return pairs


def _in_order(rows: list[dict]) -> list[Pair]:
    """The n-th train row is step n; an eval row belongs to the step before it (step 1 when
    it comes first)."""
    pairs, step = [], 0
    for entry in rows:
        if not is_eval_row(entry) or step == 0:
            step += 1
        pairs.append((step, entry))
    return pairs


def is_eval_row(entry: dict) -> bool:
    """An eval-like marker value (``"split": "validation"``) or a true eval flag."""
    for key in MARKER_KEYS:
        value = entry.get(key)
        if isinstance(value, str) and value.strip().lower() in EVAL_VALUES:
            return True
    return any(entry.get(flag) is True or str(entry.get(flag)).lower() == "true"
               for flag in EVAL_FLAGS)


def split_eval_rows(pairs: list[Pair]) -> list[Pair]:
    """Eval rows' keys as ``eval_<key>``; the markers and flags themselves are left out."""
    out = []
    for step, entry in pairs:
        if is_eval_row(entry):
            entry = {eval_key(k): v for k, v in entry.items()
                     if not _marker(k, v) and k not in STEP_KEYS}
        out.append((step, entry))
    return out


def _marker(key: str, value: object) -> bool:
    return (key in MARKER_KEYS and isinstance(value, str)) or key in EVAL_FLAGS


def eval_key(key: str) -> str:
    """``loss`` -> ``eval_loss``; ``val_loss`` -> ``eval_loss``; ``epoch`` stays ``eval_epoch``."""
    for prefix in EVAL_KEY_PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix):
            return EVAL_PREFIX + key[len(prefix):]
    return EVAL_PREFIX + key
