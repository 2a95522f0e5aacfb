"""A JSON list of per-step dicts, each with a ``step`` key (e.g. an exported metrics dump)."""

from __future__ import annotations

from app.importers.base import ImportedLog, merge_rows, step_pairs


def looks_like(data: object) -> bool:
    """A non-empty list whose items are dicts."""
    return isinstance(data, list) and bool(data) and all(isinstance(x, dict) for x in data)


def parse(data: list, path: str) -> ImportedLog:
    """Every non-summary dict must carry a step: without it the series cannot be placed."""
    pairs = step_pairs(((f"list item {i}", e) for i, e in enumerate(data)), path)
    return ImportedLog(rows=merge_rows(pairs), source_format="json_list", meta={})
