"""Console logs where TRL printed one python dict literal per logging step.

``Trainer.log`` prints e.g. ``{'loss': 0.0, 'reward': 0.9, ..., 'epoch': 0.01}`` with no step
number, interleaved with tqdm progress bars (``5/200 [00:19<...]`` joined by carriage
returns) and other output. Values can be strings in newer versions.

Step inference, first rule that applies wins (recorded in ``meta['step_inference']``):
  1. ``step`` key in the dicts themselves;
  2. ``tqdm``: the training progress bar ``n/total`` printed just before each dict, when
     every dict has one with the same total and ``n`` strictly increases;
  3. ``epoch``: when the final summary row gives the total number of steps
     (``train_runtime * train_steps_per_second``) and the dicts' ``epoch`` values strictly
     increase: step = epoch / final_epoch * total_steps (TRL often rounds epoch to 2
     decimals, which makes it non-increasing, so this rarely applies);
  4. ``interval``: row i (1-based) is step i * interval, with interval = total_steps / rows
     when the summary gives total_steps and divides evenly, else the caller's
     ``logging_steps`` (default 1).
"""

from __future__ import annotations

import ast
import itertools
import math
import re

from app.importers.base import (
    JSON_LIKE_ERRORS,
    MAX_STEP,
    ImportedLog,
    LogFormatError,
    is_summary_row,
    merge_rows,
    step_of,
)
from app.importers.columns import logger_name, rename_keys
from app.metrics.names import VOCABULARIES

_BAR = re.compile(r"(\d+)/(\d+) \[")
# another trainer's spelling of these marks a training dict; a config dict's ``lr`` does not
_TRAINING_NAMES = frozenset({"reward", "kl", "entropy", "loss", "reward_std",
                             "completions/mean_length"})
_METRIC_HINTS = frozenset({"loss", "reward", "train_runtime", "kl", "entropy", "grad_norm",
                           "policy_loss", "response_length"}
                          | {k for table in VOCABULARIES.values() for k, name in table.items()
                             if "*" not in k and name in _TRAINING_NAMES})
MAX_SEGMENT = 100_000  # a longer line is no printed metrics dict (TRL's are ~1-2 KB)
MAX_TRIES = 64  # ``{`` positions tried per line: a line of braces must not cost O(n^2)


def looks_like(text: str) -> bool:
    """Some line holds a python dict literal with a training-metric key."""
    return any(d for _, d in _dicts_with_positions(text[:2_000_000], limit=1))


def _is_metrics_dict(d: object) -> bool:
    if not isinstance(d, dict) or not d or not all(isinstance(k, str) for k in d):
        return False
    return any(k in _METRIC_HINTS or logger_name(k) in _METRIC_HINTS
               or k.startswith(("rewards/", "eval_")) for k in d)


# numpy 2 and torch print numbers wrapped: ``np.float64(0.5)``, ``tensor(0.5, device='cuda:0')``
_WRAPPED = re.compile(r"\b(?:np\.|numpy\.)?(?:float|int)\d*\(([^()]*)\)"
                      r"|\btensor\(([^(),]*)(?:,[^()]*)?\)")


def _unwrapped(segment: str) -> str:
    """The segment with numpy/torch number wrappers replaced by the number they hold."""
    if "(" not in segment:
        return segment
    return _WRAPPED.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), segment)


# A printed dict's first key is a string: only a ``{`` before a quote (past blanks, a
# parenthesis or a string prefix) can open a metrics dict. Trying every ``{`` parsed each brace
# of a printed sample (LaTeX ``\frac{1}{2}``, chat templates): a 19 MB OpenRLHF log with its
# samples cost 1.2M ``literal_eval`` calls and 17 s to read, 2 s now (issue 55).
_DICT_START = re.compile(r"\{[\s(]*[rRuU]?['\"]")


def _literal_at(segment: str) -> dict | None:
    """The widest ``{...}`` in a segment that parses as a metrics dict, if any."""
    segment = _unwrapped(segment)
    end = segment.rfind("}")
    found = _DICT_START.search(segment, 0, end)
    for _ in range(MAX_TRIES):
        if found is None:
            break
        start = found.start()
        try:  # TypeError: a chat template's ``{{ '...' }}`` is a set of a set (unhashable)
            value = ast.literal_eval(segment[start:end + 1])
        except JSON_LIKE_ERRORS:
            value = None
        if _is_metrics_dict(value):
            return value  # type: ignore[return-value]
        found = _DICT_START.search(segment, start + 1, end)
    return None


def _dicts_with_positions(text: str, limit: int | None = None) -> list[tuple[int, dict]]:
    """(offset, dict) for each printed metrics dict; segments split on \\n and \\r (tqdm)."""
    found: list[tuple[int, dict]] = []
    offset = 0
    for segment in re.split(r"[\r\n]", text):
        if "{" in segment and "}" in segment and len(segment) <= MAX_SEGMENT:
            d = _literal_at(segment)
            if d is not None:
                found.append((offset, d))
                if limit and len(found) >= limit:
                    break
        offset += len(segment) + 1
    return found


def _bar_steps(text: str, offsets: list[int]) -> list[int] | None:
    """Rule 2: the tqdm count printed last before each dict, if consistent."""
    bars = [(m.start(), int(m.group(1)), int(m.group(2))) for m in _BAR.finditer(text)]
    steps, totals, j, last = [], set(), 0, None
    for off in offsets:
        while j < len(bars) and bars[j][0] < off:
            last = bars[j]
            j += 1
        if last is None:
            return None
        steps.append(last[1])
        totals.add(last[2])
    if len(totals) != 1 or any(b <= a for a, b in itertools.pairwise(steps)):
        return None
    return steps


def _total_steps(summary: dict | None) -> int | None:
    if not summary:
        return None
    try:
        total = float(summary["train_runtime"]) * float(summary["train_steps_per_second"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    return round(total) if 1 <= total < MAX_STEP else None


def _number(value: object) -> float | None:
    """A finite float from a logged value, or None."""
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


def _infer_steps(text: str, rows: list[tuple[int, dict]], summary: dict | None,
                 logging_steps: int) -> tuple[list[int], str]:
    dicts = [d for _, d in rows]
    explicit = [step_of(d) for d in dicts]
    if all(s is not None for s in explicit):
        return [int(s) for s in explicit], "step"  # type: ignore[arg-type]
    bar = _bar_steps(text, [off for off, _ in rows])
    if bar is not None:
        return bar, "tqdm"
    total = _total_steps(summary)
    epochs = [d.get("epoch") for d in dicts]
    if total and all(isinstance(e, (int, float)) and math.isfinite(e) for e in epochs):
        final = _number(summary.get("epoch") if summary else None) or float(epochs[-1])
        if final > 0 and all(b > a for a, b in itertools.pairwise(epochs)):
            return [max(1, round(float(e) / final * total)) for e in epochs], "epoch"
    interval = logging_steps
    if total and total % len(dicts) == 0:
        interval = total // len(dicts)
    return [(i + 1) * interval for i in range(len(dicts))], "interval"


def parse(text: str, path: str, logging_steps: int = 1) -> ImportedLog:
    """Metrics dicts in print order, steps inferred as described in the module docstring."""
    found = _dicts_with_positions(text)
    summary = next((d for _, d in found if is_summary_row(d)), None)
    rows = [(off, d) for off, d in found if not is_summary_row(d)]
    if not rows:
        raise LogFormatError(path, "no printed metrics dicts found")
    steps, how = _infer_steps(text, rows, summary, logging_steps)
    meta: dict = {"step_inference": how}
    if (total := _total_steps(summary)) is not None:
        meta["max_steps"] = total
    if len(steps) > 1:
        meta["logging_steps"] = steps[1] - steps[0]
    renames: dict[str, str] = {}
    pairs = [(s, rename_keys(d, renames)) for s, (_, d) in zip(steps, rows)]
    return ImportedLog(rows=merge_rows(pairs), source_format="console", meta=meta,
                       renames=renames)
