"""Shared types for log importers: the result dataclass, the error, and row merging."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.core.errors import without_server_paths
from app.core.json_body import MAX_DEPTH
from app.core.json_body import depth as json_depth
from app.metrics.names import Row, normalize_row
from grpodeck.contract.limits import MAX_STEP  # the same bound as the report API's

# Keys that describe the trainer, not the policy; they stay out of the metric rows.
STEP_KEYS = ("step", "global_step", "train/global_step")  # train/: OpenRLHF's wandb logger
SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second", "train_steps_per_second",
                          "train_loss", "total_flos"})


class LogFormatError(ValueError):
    """A file could not be read as any supported training-log format; ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        reason = without_server_paths(reason)  # it often quotes an exception: see there
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class LogTooDeepError(LogFormatError):
    """A JSON document nested deeper than a training log ever is: refused as malformed input
    (HTTP 400 on upload), where parsing it would exhaust the interpreter's stack."""


@dataclass
class ImportedLog:
    """Per-step metrics read from a file, in canonical names, sorted by step.

    Train and eval rows logged at the same step are merged into one dict (eval keys keep
    their ``eval_`` prefix, so nothing collides).
    """

    rows: list[Row]
    source_format: str
    meta: dict = field(default_factory=dict)
    # original key -> the name it was read as (a reader's column clean-up, then the
    # vocabulary and the user's mapping), so a report can say "read `mean_reward` as reward"
    renames: dict[str, str] = field(default_factory=dict)


def check_steps(log: ImportedLog, path: str) -> ImportedLog:
    """Refuse a log whose steps fall outside 0 <= step < 2**31 (nothing could store them)."""
    bad = [s for s, _ in log.rows if not 0 <= s < MAX_STEP]
    if bad:
        raise LogFormatError(path, f"step {bad[0]} is out of range: steps run from 0 to "
                                   f"{MAX_STEP - 1}")
    return log


def is_summary_row(d: dict) -> bool:
    """The end-of-training summary row (``train_runtime`` ...) carries no per-step metrics."""
    return "train_runtime" in d


def merge_rows(pairs: list[tuple[int, dict]]) -> list[Row]:
    """Normalise and merge raw (step, dict) pairs: one canonical dict per step, sorted.

    ``STEP_KEYS`` are removed from the metrics; later rows for a step
    update earlier ones (so a re-logged value wins, and eval rows join train rows).
    """
    merged: dict[int, dict[str, float]] = {}
    for step, raw in pairs:
        clean = {k: v for k, v in raw.items()
                 if k not in STEP_KEYS and k not in SUMMARY_KEYS}
        merged.setdefault(int(step), {}).update(normalize_row(clean))
    return [(s, merged[s]) for s in sorted(merged) if merged[s]]


def step_pairs(labelled: Iterable[tuple[str, object]], path: str) -> list[tuple[int, dict]]:
    """(step, dict) for each per-step entry; summary rows and non-dicts are skipped.

    ``labelled`` yields (where the entry is, e.g. "line 3", entry) so an entry without a step
    gets an error that says where it is: without a step the series cannot be placed.
    """
    pairs = []
    for label, entry in labelled:
        if not isinstance(entry, dict) or is_summary_row(entry):
            continue
        step = step_of(entry)
        if step is None:
            raise LogFormatError(path, f"{label} has no 'step'")
        pairs.append((step, entry))
    return pairs


def step_of(d: dict) -> int | None:
    """The integer step of a row dict, or None when it has none."""
    for key in STEP_KEYS:
        v = d.get(key)
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) or (isinstance(v, str) and v.strip().lstrip("-").isdigit()):
            try:
                return int(float(v))
            except (TypeError, ValueError, OverflowError):  # inf: JSON allows "Infinity"
                return None
    return None


# What parsing untrusted text as a Python or JSON literal can raise besides a clean "no"
JSON_LIKE_ERRORS = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError,
                    OverflowError)
MAX_JSON_DEPTH = MAX_DEPTH  # TRL's deepest document (trainer_state.json) nests 3 levels


def load_json(text: str, path: str) -> object:
    """``json.loads`` that refuses a document nested deeper than ``MAX_JSON_DEPTH`` with
    LogTooDeepError (the parser itself raises RecursionError near 1000 levels, and later
    readers, nbformat's schema check among them, recurse too); other malformed JSON still
    raises ``json.JSONDecodeError`` for the caller to try other formats."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise json.JSONDecodeError(str(exc), text[:100], 0) from None
    else:
        if json_depth(value) <= MAX_JSON_DEPTH:
            return value
    raise LogTooDeepError(path, f"JSON nested deeper than {MAX_JSON_DEPTH} levels: not a "
                                "training log")
