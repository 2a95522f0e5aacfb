"""Importers for GRPO training logs made elsewhere: trainer_state.json, JSON, JSONL, console
logs (TRL/OpenRLHF printed dicts, verl lines, hand-written loops), notebooks, W&B CSV and run
folders, TensorBoard events, MLflow ``mlruns/``, trackio (docs/log-formats.md).

Public API: :func:`load_log`, :class:`ImportedLog`, :class:`LogFormatError`.
"""

from app.importers.base import ImportedLog, LogFormatError
from app.importers.detect import load_log

__all__ = ["ImportedLog", "LogFormatError", "load_log"]
