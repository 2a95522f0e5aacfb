"""Health diagnostics for GRPO runs: metric series in, findings out (no DB, no web).

Public API:
  diagnose(rows, context=None) -> Diagnosis          one-shot
  DiagnosticsState.new(context) / .update(rows)       incremental, .to_json()/.from_json()
  diagnose_file(path, context=None) -> Diagnosis      any log format app.importers reads
  Finding, Diagnosis, RunContext                      data model (to_dict() is JSON-safe)
  report.format_text / report.to_json_dict            renderings for the CLI
"""

from __future__ import annotations

from pathlib import Path

from app.diagnostics.model import Diagnosis, Finding, RunContext
from app.diagnostics.state import DiagnosticsState, diagnose


def diagnose_file(path: str | Path, context: RunContext | None = None) -> Diagnosis:
    """Import a log file (any supported format) and diagnose it.

    ``max_completion_length`` is not in logs; pass it in ``context`` when known.
    Raises ``app.importers.LogFormatError`` for unreadable files.
    """
    from app.importers import load_log

    return diagnose(load_log(path).rows, context)


__all__ = ["Diagnosis", "DiagnosticsState", "Finding", "RunContext", "diagnose", "diagnose_file"]
