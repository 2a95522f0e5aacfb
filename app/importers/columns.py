"""Column and tag names as trackers and tables write them, back to the names TRL logs.

Why one module: the same metric reaches us as ``train/reward`` (the Trainer's W&B, TensorBoard
and MLflow callbacks prefix ``train/`` and ``eval/``), as ``Training Loss`` or
``rewards / format_reward / mean`` (the notebook progress table's headers), or as
``my-run - train/reward`` (a W&B panel's CSV export). Every reader cleans names here, and
records what it renamed, so a report can say which original name was read as what.
Trainer vocabularies (verl, OpenRLHF, hand-written loops) are not this module's concern: they
live in ``app.metrics.names`` and apply after it.
"""

from __future__ import annotations

import re

STEP_NAMES = frozenset({"step", "_step", "global_step", "train/global_step", "iteration", "iter"})
# transformers' NotebookProgressCallback writes "Training Loss", "Validation Loss" and then
# each metric with "_" turned into " " and the first letter capitalised (older versions)
_TABLE_NAMES = {"training loss": "loss", "validation loss": "eval_loss", "epoch": "epoch",
                "learning rate": "learning_rate", "grad norm": "grad_norm"}
_SLASH = re.compile(r"\s*/\s*")
_WANDB_RUN = re.compile(r"^.+? - (?=\S)")  # "<run name> - <key>" in a W&B panel export
WANDB_BANDS = ("__MIN", "__MAX")  # a panel export's min/max band columns: not metrics


def logger_name(key: str) -> str:
    """``train/x`` -> ``x`` and ``eval/x`` -> ``eval_x`` (the Trainer's tracker callbacks);
    other names unchanged (OpenRLHF's own ``train/`` names reach the same canonical names
    through its vocabulary, unprefixed or not)."""
    if key.startswith("train/") and key != "train/global_step":
        return key.removeprefix("train/")
    if key.startswith("eval/"):
        return "eval_" + key.removeprefix("eval/")
    return key


def is_step(name: str) -> bool:
    """A column that holds the step rather than a metric."""
    return name.strip().lower() in STEP_NAMES


def table_column(header: str) -> str:
    """A table header as a metric name: ``rewards / f / mean`` -> ``rewards/f/mean``,
    ``Training Loss`` -> ``loss``, ``Step`` -> ``step``, ``train/reward`` -> ``reward``."""
    name = _SLASH.sub("/", " ".join(header.split()))
    lowered = name.lower()
    if lowered in _TABLE_NAMES:
        return _TABLE_NAMES[lowered]
    if is_step(name):
        return "step"
    return logger_name(name)


def wandb_column(header: str) -> str | None:
    """A W&B CSV column as a metric name; None for a band column (``...__MIN``/``__MAX``) and
    for W&B's own bookkeeping (``_runtime``, ``_timestamp``)."""
    name = _WANDB_RUN.sub("", header.strip(), count=1)
    if name.endswith(WANDB_BANDS) or name in ("_runtime", "_timestamp", "_wandb"):
        return None
    return table_column(name)


def rename_keys(metrics: dict[str, object], rename: dict[str, str]) -> dict[str, object]:
    """``metrics`` under cleaned names, recording each change in ``rename`` (original ->
    new); a cleaned name already present keeps its first value."""
    out: dict[str, object] = {}
    for key, value in metrics.items():
        new = logger_name(key) if isinstance(key, str) else key
        if new != key:
            rename[key] = new
        out.setdefault(new, value)
    return out
