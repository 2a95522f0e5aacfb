"""Jupyter/Colab notebooks (``.ipynb``): the training log kept in the cells' saved outputs.

Most Colab/Unsloth GRPO users keep their run as the notebook itself. Read with nbformat
(``nbformat.reads(..., as_version=4)``, which also upgrades older notebook versions), every
code cell's outputs are looked at:

- ``text/html`` tables (transformers' notebook progress callback, which TRL uses): the last
  table with a ``Step`` column is the run (the callback redraws one table in place; a second
  ``trainer.train()`` draws a new one). Headers are cleaned: ``Training Loss`` -> ``loss``,
  ``rewards / format_reward / mean`` -> ``rewards/format_reward/mean``.
- ``text/plain`` tables with a ``Step`` column (a printed pandas DataFrame), the same way.
- otherwise the printed text (``stream`` and ``text/plain`` outputs, in cell order) is read as
  a console log: printed metrics dicts or ``key: value`` lines.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from app.importers.base import JSON_LIKE_ERRORS, ImportedLog, LogFormatError, merge_rows
from app.importers.tables import Table, html_tables, step_rows, text_tables

TextReader = Callable[[str, str, int], ImportedLog]


def looks_like(data: object) -> bool:
    """A JSON object with ``cells`` (or v3's ``worksheets``) and an ``nbformat`` version."""
    return (isinstance(data, dict) and isinstance(data.get("nbformat"), int)
            and isinstance(data.get("cells", data.get("worksheets")), list))


def _text(value: object) -> str:
    """nbformat keeps multi-line strings as lists of lines."""
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _outputs(nb: object) -> list[dict]:
    cells = getattr(nb, "cells", None) or []
    return [out for cell in cells if isinstance(cell, dict)
            for out in (cell.get("outputs") or []) if isinstance(out, dict)]


def _collect(outputs: list[dict]) -> tuple[list[Table], str]:
    """(tables with a step column, printed text) of a notebook's outputs, in cell order."""
    tables: list[Table] = []
    printed: list[str] = []
    for out in outputs:
        if out.get("output_type") == "stream":
            printed.append(_text(out.get("text")))
            continue
        data = out.get("data") if isinstance(out.get("data"), dict) else {}
        if html := _text(data.get("text/html")):
            tables += html_tables(html)
        if plain := _text(data.get("text/plain")):
            tables += text_tables(plain)
            printed.append(plain)
    return tables, "\n".join(printed)


def parse(data: dict, where: str, logging_steps: int, read_text: TextReader) -> ImportedLog:
    """The run in a notebook's outputs (see the module docstring for which one)."""
    import nbformat

    try:
        nb = nbformat.reads(json.dumps(data), as_version=4)
    except (*JSON_LIKE_ERRORS, KeyError, AttributeError, nbformat.reader.NotJSONError) as exc:
        raise LogFormatError(where, f"not a readable notebook ({type(exc).__name__})") from None
    tables, printed = _collect(_outputs(nb))
    for table in reversed(tables):
        rename: dict[str, str] = {}
        rows = step_rows(table, rename)
        if rows:
            return ImportedLog(rows=merge_rows(rows), source_format="notebook (table)",
                               renames=rename)
    try:
        log = read_text(printed, where, logging_steps)
    except LogFormatError:
        raise LogFormatError(where, "notebook outputs hold no training table (TRL's Step / "
                                    "Training Loss table), printed metrics dicts or "
                                    "key: value lines") from None
    log.source_format = f"notebook ({log.source_format})"
    return log
