"""TRL/transformers ``trainer_state.json``: metrics live in ``log_history``."""

from __future__ import annotations

from app.importers.base import ImportedLog, LogFormatError, is_summary_row, merge_rows, step_of

META_KEYS = ("max_steps", "logging_steps", "eval_steps", "global_step", "num_train_epochs",
             "train_batch_size", "save_steps")


def looks_like(data: object) -> bool:
    """A trainer_state is a JSON object with a ``log_history`` list."""
    return isinstance(data, dict) and isinstance(data.get("log_history"), list)


def parse(data: dict, path: str) -> ImportedLog:
    """Rows from ``log_history``; the final ``train_runtime`` summary row is skipped."""
    pairs = []
    for i, entry in enumerate(data["log_history"]):
        if not isinstance(entry, dict) or is_summary_row(entry):
            continue
        step = step_of(entry)
        if step is None:
            raise LogFormatError(path, f"log_history entry {i} has no 'step'")
        pairs.append((step, entry))
    meta = {k: data[k] for k in META_KEYS if k in data}
    return ImportedLog(rows=merge_rows(pairs), source_format="trainer_state", meta=meta)
