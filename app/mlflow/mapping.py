"""MLflow's vocabulary -> the Deck's: experiments are groups, params are config, tags are
tags, metrics are rows for the ingest pipeline, a run's end status is how its process ended.

Pure functions: what they refuse, they refuse with MLflow's ``INVALID_PARAMETER_VALUE`` and the
reason, before anything is stored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from app.listing.service import TAG_RE
from app.metrics.names import Row, normalize_row
from app.mlflow.errors import invalid

DEFAULT_EXPERIMENT_ID = "0"  # MLflow's "Default": runs in no group
DEFAULT_EXPERIMENT_NAME = "Default"
# A group name that is both a valid Deck tag ("group:NAME", 40 characters at most) and a valid
# MLflow experiment id, so the id can be the group itself and nothing needs storing.
GROUP_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,32}$")
SYSTEM_TAG_PREFIX = "mlflow."  # MLflow's bookkeeping (user, source file, git commit)
RUN_NAME_TAG = "mlflow.runName"
NOTE_TAG = "mlflow.note.content"
RESERVED_KEYS = frozenset({"group", "alerts"})  # set by the Deck itself, not by a param or tag
MAX_NAME = 120
MAX_STEP = 2**31 - 1
MAX_PARAM_CHARS = 4_000  # the Deck's config holds text this long; MLflow allows 6,000


def group_of(experiment_name: str) -> str | None:
    """The Deck group an experiment name stands for; None for MLflow's Default experiment."""
    if experiment_name == DEFAULT_EXPERIMENT_NAME:
        return None
    group = experiment_name.strip().lower()
    if not GROUP_RE.match(group) or group == DEFAULT_EXPERIMENT_ID:
        raise invalid(f"experiment name {experiment_name[:60]!r}: experiments are GRPO Deck "
                      "groups, use 1-33 letters, digits, '_' or '-'")
    return group


def experiment_id_of(group: str | None) -> str:
    return group or DEFAULT_EXPERIMENT_ID


def group_of_id(experiment_id: str) -> str | None:
    """The inverse of ``experiment_id_of``; a 404 is the caller's for an id that is no group."""
    if experiment_id == DEFAULT_EXPERIMENT_ID:
        return None
    if not GROUP_RE.match(experiment_id):
        raise ValueError(experiment_id)
    return experiment_id


def param_value(value: str) -> float | int | bool | str | None:
    """MLflow params are strings; the Deck's config is typed (its diagnostics read
    ``num_generations`` as an int), so numbers and booleans are read back as what they were."""
    text = value.strip()
    if text in ("True", "true", "False", "false"):
        return text.lower() == "true"
    if text == "None":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return _shortened(value)
    return number if math.isfinite(number) else value


def _shortened(value: str) -> str:
    """A long param (a chat template, a whole prompt) is kept for reading, cut to fit."""
    return value if len(value) <= MAX_PARAM_CHARS else value[:MAX_PARAM_CHARS - 1] + "…"


def params_to_spec(params: Iterable[tuple[str, str]]) -> dict[str, float | int | bool | str | None]:
    spec: dict[str, float | int | bool | str | None] = {}
    for key, value in params:
        if key in RESERVED_KEYS:
            raise invalid(f"param {key!r} is reserved: GRPO Deck sets it itself")
        spec[key] = param_value(value)
    return spec


def deck_tag(key: str, value: str) -> str:
    """``key``/``value`` -> one Deck tag, ``key:value`` (or ``key`` for an empty value)."""
    if key.lower() in RESERVED_KEYS:
        raise invalid(f"tag {key!r} is reserved: the group is the experiment")
    tag = (f"{key}:{value}" if value else key).strip().lower()
    if not TAG_RE.match(tag):
        raise invalid(f"tag {key}={value[:40]!r} does not make a GRPO Deck tag ('key:value', "
                      "1-40 letters, digits, '.', '_', ':' or '-')")
    return tag


class TagChanges:
    """What a list of MLflow tags asks of a run: Deck tags (by key), a new name, a note."""

    def __init__(self, tags: Iterable[tuple[str, str]]) -> None:
        self.tags: dict[str, str] = {}
        self.name: str | None = None
        self.note: str | None = None
        for key, value in tags:
            if key == RUN_NAME_TAG:
                self.name = value
            elif key == NOTE_TAG:
                self.note = value
            elif not key.startswith(SYSTEM_TAG_PREFIX):
                self.tags[key.strip().lower()] = deck_tag(key, value)

    def merged_into(self, existing: Sequence[str]) -> list[str]:
        """The run's tags after these: a key set again replaces its old ``key:value``."""
        kept = [t for t in existing
                if not any(t == key or t.startswith(f"{key}:") for key in self.tags)]
        return sorted({*kept, *self.tags.values()})


def run_name(name: str | None) -> str | None:
    """A run name as the Deck stores it (120 characters; MLflow allows 250)."""
    name = (name or "").strip()
    return name[:MAX_NAME] or None


def metric_value(value: object) -> float:
    """MLflow's client sends NaN and infinities as protobuf JSON does: "NaN", "Infinity"."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise invalid(f"metric value {str(value)[:40]!r} is not a number")
    try:
        return float(value)
    except ValueError:
        raise invalid(f"metric value {value[:40]!r} is not a number") from None


def metric_rows(metrics: Iterable[tuple[str, object, int]]) -> list[Row]:
    """(key, value, step) -> the pipeline's rows, one per step, names canonical."""
    by_step: dict[int, dict[str, float]] = {}
    for key, value, step in metrics:
        if not 0 <= step <= MAX_STEP:
            raise invalid(f"metric {key!r}: step {step} is outside 0..{MAX_STEP}")
        by_step.setdefault(step, {})[key] = metric_value(value)
    return [(step, normalize_row(row)) for step, row in sorted(by_step.items())]


# MLflow's terminal statuses -> (the process's return code, the error to record)
END_STATUSES: dict[str, tuple[int, str | None]] = {
    "FINISHED": (0, None),
    "FAILED": (1, "the MLflow client ended the run as FAILED"),
}
KILLED = "KILLED"
LIVE_STATUSES = frozenset({"RUNNING", "SCHEDULED"})
DECK_TO_MLFLOW = {"queued": "SCHEDULED", "running": "RUNNING", "succeeded": "FINISHED",
                  "failed": "FAILED", "cancelled": "KILLED", "imported": "FINISHED"}
