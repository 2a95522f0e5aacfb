"""JSON Lines: one per-step dict per line, each with a ``step`` key."""

from __future__ import annotations

import json

from app.importers.base import ImportedLog, LogFormatError, is_summary_row, merge_rows, step_of


def looks_like(text: str) -> bool:
    """At least one non-blank line and the first one parses as a JSON object."""
    for line in text.splitlines():
        if line.strip():
            try:
                return isinstance(json.loads(line), dict)
            except json.JSONDecodeError:
                return False
    return False


def parse(text: str, path: str) -> ImportedLog:
    """Blank lines are skipped; a malformed line is an error (a truncated last line is not)."""
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    pairs = []
    for idx, (lineno, line) in enumerate(lines):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            if idx == len(lines) - 1 and idx > 0:
                break  # a live writer may have been mid-line: tolerate a torn last line
            raise LogFormatError(path, f"line {lineno} is not JSON: {exc.msg}") from exc
        if not isinstance(entry, dict) or is_summary_row(entry):
            continue
        step = step_of(entry)
        if step is None:
            raise LogFormatError(path, f"line {lineno} has no 'step'")
        pairs.append((step, entry))
    return ImportedLog(rows=merge_rows(pairs), source_format="jsonl", meta={})
