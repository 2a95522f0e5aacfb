"""Import the completions TRL writes with ``log_completions=True`` as captured rollouts.

TRL's ``GRPOTrainer.log`` writes ``<output_dir>/completions/completions_<step>.parquet`` with
columns ``step, prompt, completion, <one per reward function>, <log_extra columns>, advantage``.
:func:`load_completions` turns one such file, or a directory of them, into the same wire shape
the worker sends (``[{"step", "groups": [{"index", "prompt", "completions": [...]}]}]``), so an
imported run gets the same rollout inspector.

What the file cannot tell us, and what we do instead:
  * reward weights: ``total`` is the UNWEIGHTED sum of the reward columns (null when all null);
    the ``advantage`` column is still the trainer's (weighted) value;
  * token lengths / truncation: ``length`` and ``truncated`` are null (character counts are
    not tokens);
  * which columns are rewards: every numeric column besides ``step``/``advantage`` (numeric
    ``log_extra`` columns are indistinguishable and count as rewards; other extras are ignored);
  * group boundaries: consecutive rows with the same prompt within a step form a group; pass
    ``num_generations`` to split a run of identical prompts into groups of that size.
"""

from __future__ import annotations

import math
import re
from itertools import groupby
from numbers import Real
from pathlib import Path
from typing import Any

from app.importers.base import MAX_STEP, LogFormatError
from grpodeck.contract.text import clip, completion_text, render_messages

STEP_IN_NAME = re.compile(r"completions_(\d+)\.parquet$")
REQUIRED = ("prompt", "completion", "advantage")


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise LogFormatError(str(path), "file not found")
    folder = path / "completions" if (path / "completions").is_dir() else path
    files = sorted(folder.glob("completions_*.parquet"))
    if not files:
        raise LogFormatError(str(path), "no completions_<step>.parquet files found")
    return files


def _num(value: Any) -> float | None:
    """A finite-or-inf float, or None for null/NaN/non-numbers."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _step(value: Any, file: Path) -> int:
    """A row's step: a whole number in 0 <= step < 2**31 (what the run stores), else a reason."""
    number = _num(value)
    if number is None or not math.isfinite(number) or number != int(number) \
            or not 0 <= number < MAX_STEP:
        raise LogFormatError(str(file), f"step {value!r:.40} is not a step number "
                                        f"(0 to {MAX_STEP - 1})")
    return int(number)


def _is_numeric(column: Any) -> bool:
    """Numbers (or nulls) only: a reward column, possibly all None when a function abstained."""
    if column.dtype.kind in "iuf":
        return True
    values = [v for v in column if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return all(isinstance(v, Real) and not isinstance(v, bool) for v in values)


def _read(file: Path) -> list[dict[str, Any]]:
    import pandas as pd

    try:
        df = pd.read_parquet(file)
    except Exception as exc:  # pyarrow raises many types for bad files
        raise LogFormatError(str(file), f"not a readable parquet file ({exc})") from exc
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise LogFormatError(str(file), f"not a TRL completions table: no {', '.join(missing)} column")
    if "step" not in df.columns:
        m = STEP_IN_NAME.search(file.name)
        if m is None:
            raise LogFormatError(str(file), "no 'step' column and no step in the file name")
        df["step"] = int(m.group(1))
    rewards = [c for c in df.columns
               if c not in ("step", "prompt", "completion", "advantage") and _is_numeric(df[c])]
    rows = []
    for rec in df.to_dict("records"):
        comps = {str(n): _num(rec[n]) for n in rewards}
        present = [v for v in comps.values() if v is not None]
        rows.append({
            "step": _step(rec["step"], file),
            "prompt": clip(render_messages(rec["prompt"])),
            "completion": {
                "text": clip(completion_text(rec["completion"])),
                "rewards": comps, "total": sum(present) if present else None,
                "advantage": _num(rec["advantage"]), "length": None, "truncated": None}})
    return rows


def load_completions(path: str | Path, num_generations: int | None = None) -> list[dict[str, Any]]:
    """Captured steps, sorted by step, from a completions parquet file or directory."""
    rows = [r for f in _files(Path(path)) for r in _read(f)]
    steps: dict[int, list[dict[str, Any]]] = {}
    for r in rows:  # stable: keeps file/row order within a step
        steps.setdefault(r["step"], []).append(r)
    out = []
    for step in sorted(steps):
        groups: list[dict[str, Any]] = []
        for prompt, run in groupby(steps[step], key=lambda r: r["prompt"]):
            comps = [r["completion"] for r in run]
            size = num_generations or len(comps)
            for i in range(0, len(comps), size):
                groups.append({"index": len(groups), "prompt": prompt,
                               "completions": comps[i:i + size]})
        out.append({"step": step, "groups": groups})
    return out
