"""TRL/transformers ``trainer_state.json``: metrics live in ``log_history``."""

from __future__ import annotations

from app.importers.base import ImportedLog, merge_rows, step_pairs

META_KEYS = ("max_steps", "logging_steps", "eval_steps", "global_step", "num_train_epochs",
             "train_batch_size", "save_steps")


def looks_like(data: object) -> bool:
    """A trainer_state is a JSON object with a ``log_history`` list."""
    return isinstance(data, dict) and isinstance(data.get("log_history"), list)


def parse(data: dict, path: str) -> ImportedLog:
    """Rows from ``log_history``; the final ``train_runtime`` summary row is skipped."""
    pairs = step_pairs(((f"log_history entry {i}", e)
                        for i, e in enumerate(data["log_history"])), path)
    meta = {k: data[k] for k in META_KEYS if k in data}
    return ImportedLog(rows=merge_rows(pairs), source_format="trainer_state", meta=meta)
