"""A JSON list of per-step dicts, each with a ``step`` key (e.g. an exported metrics dump)."""

from __future__ import annotations

from app.importers.base import ImportedLog, LogFormatError, is_summary_row, merge_rows, step_of


def looks_like(data: object) -> bool:
    """A non-empty list whose items are dicts."""
    return isinstance(data, list) and bool(data) and all(isinstance(x, dict) for x in data)


def parse(data: list, path: str) -> ImportedLog:
    """Every non-summary dict must carry a step: without it the series cannot be placed."""
    pairs = []
    for i, entry in enumerate(data):
        if is_summary_row(entry):
            continue
        step = step_of(entry)
        if step is None:
            raise LogFormatError(path, f"list item {i} has no 'step'")
        pairs.append((step, entry))
    return ImportedLog(rows=merge_rows(pairs), source_format="json_list", meta={})
