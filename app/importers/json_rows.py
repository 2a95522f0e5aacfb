"""A JSON list of per-step dicts (e.g. an exported metrics dump); the step as for JSON Lines
(``app.importers.entries``)."""

from __future__ import annotations

from app.importers.base import ImportedLog, merge_rows
from app.importers.entries import rows_of


def looks_like(data: object) -> bool:
    """A non-empty list whose items are dicts."""
    return isinstance(data, list) and bool(data) and all(isinstance(x, dict) for x in data)


def parse(data: list, path: str, step_key: str | None = None) -> ImportedLog:
    """Every non-summary dict is placed at its step (see ``app.importers.entries``)."""
    pairs, meta = rows_of(((f"list item {i}", e) for i, e in enumerate(data)), path, step_key)
    return ImportedLog(rows=merge_rows(pairs), source_format="json_list", meta=meta)
