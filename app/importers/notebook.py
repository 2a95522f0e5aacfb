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


# Output fields nbformat's reader joins when they are lists of lines (v4's ``text``; v3's
# ``text`` and the mime types it keeps beside it): a list holding a number breaks the join
MULTILINE = ("text", "html", "svg", "latex", "javascript", "json")


def _lines(value: object) -> object:
    """A list of lines keeps only its strings; anything else as it was."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else value


def _cleaned_output(out: dict) -> dict:
    """One output with ``data`` an object (dropped otherwise) and its line lists all text."""
    clean = {k: _lines(v) if k in MULTILINE else v for k, v in out.items() if k != "data"}
    if isinstance(data := out.get("data"), dict):
        clean["data"] = {mime: _lines(v) for mime, v in data.items()}
    return clean


def _cleaned_outputs(outputs: object) -> list[dict]:
    """A cell's outputs as a list of objects: one output saved without its list is read as
    the one it is; anything that is not an output object is left out."""
    if isinstance(outputs, dict):
        outputs = [outputs]
    if not isinstance(outputs, list):
        return []
    return [_cleaned_output(out) for out in outputs if isinstance(out, dict)]


def _cleaned_cells(cells: object) -> list[dict]:
    if not isinstance(cells, list):
        return []
    return [{**cell, "outputs": _cleaned_outputs(cell["outputs"])} if "outputs" in cell
            else cell for cell in cells if isinstance(cell, dict)]


def cleaned(data: dict) -> dict:
    """The notebook with its cells and outputs in the shape nbformat's reader assumes.

    Why: the reader calls ``.get`` and ``.items`` on what it expects to be objects, so an
    ``outputs`` saved as an object (or ``data`` as a list) raised AttributeError inside it,
    which it re-raises as jsonschema's ValidationError: a 500 (issue 55). Cleaned, the cells
    that make sense are read, and the rest is left out rather than refusing the notebook."""
    clean = {**data, "cells": _cleaned_cells(data.get("cells"))}
    if "worksheets" in data:  # version 3: cells inside worksheets
        sheets = data["worksheets"] if isinstance(data["worksheets"], list) else []
        clean["worksheets"] = [{**sheet, "cells": _cleaned_cells(sheet.get("cells"))}
                               for sheet in sheets if isinstance(sheet, dict)]
    return clean


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
        nb = nbformat.reads(json.dumps(cleaned(data)), as_version=4)
    except (*JSON_LIKE_ERRORS, KeyError, AttributeError, nbformat.reader.NotJSONError,
            nbformat.ValidationError) as exc:  # what cleaning left nbformat cannot read
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
