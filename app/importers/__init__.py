"""Importers for GRPO training logs made elsewhere (trainer_state.json, JSON, JSONL, console).

Public API: :func:`load_log`, :class:`ImportedLog`, :class:`LogFormatError`.
"""

from app.importers.base import ImportedLog, LogFormatError
from app.importers.detect import load_log

__all__ = ["ImportedLog", "LogFormatError", "load_log"]
