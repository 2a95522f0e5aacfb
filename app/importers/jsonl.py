"""JSON Lines: one per-step dict per line; the step from its step key, a column that behaves
like one, or the line order (``app.importers.entries``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

from app.importers.base import ImportedLog, LogFormatError, load_json, merge_rows
from app.importers.entries import rows_of


def looks_like(text: str) -> bool:
    """At least one non-blank line and the first one parses as a JSON object."""
    for line in text.splitlines():
        if line.strip():
            try:
                return isinstance(load_json(line, "line"), dict)
            except (json.JSONDecodeError, LogFormatError):
                return False
    return False


def _entries(text: str, path: str) -> Iterator[tuple[str, object]]:
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    for idx, (lineno, line) in enumerate(lines):
        try:
            entry = load_json(line, f"{path}: line {lineno}")
        except json.JSONDecodeError as exc:
            if idx == len(lines) - 1 and idx > 0:
                return  # a live writer may have been mid-line: tolerate a torn last line
            raise LogFormatError(path, f"line {lineno} is not JSON: {exc.msg}") from exc
        yield f"line {lineno}", entry


def parse(text: str, path: str, step_key: str | None = None) -> ImportedLog:
    """Blank lines are skipped; a malformed line is an error (a truncated last line is not).
    ``step_key``: the key the user named as the step (``--map grpo_step=step``)."""
    pairs, meta = rows_of(_entries(text, path), path, step_key)
    return ImportedLog(rows=merge_rows(pairs), source_format="jsonl", meta=meta)
