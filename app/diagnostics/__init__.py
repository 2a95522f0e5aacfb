"""Health diagnostics for GRPO runs: metric series in, findings out (no DB, no web).

Public API:
  diagnose(rows, context=None) -> Diagnosis          one-shot
  DiagnosticsState.new(context) / .update(rows)       incremental, .to_json()/.from_json()
  Finding, Diagnosis, RunContext                      data model (to_dict() is JSON-safe)
  report.format_text / report.to_json_dict            renderings for the CLI
"""

from __future__ import annotations

from app.diagnostics.model import Diagnosis, Finding, RunContext
from app.diagnostics.state import DiagnosticsState, diagnose

__all__ = ["Diagnosis", "DiagnosticsState", "Finding", "RunContext", "diagnose"]
