"""Tables of metrics by step, as a notebook shows them: HTML ``<table>`` and plain-text tables.

transformers' notebook progress callback (what TRL uses in Jupyter/Colab) renders its log as
an HTML table, ``<th>Step</th><th>Training Loss</th><th>reward</th>...``, one ``<tr>`` per
logged step, "No log" where a column had no value yet. The HTML is read with the standard
library's ``html.parser`` (a tokenizer that tolerates broken markup), never with regular
expressions. A pandas ``DataFrame`` printed as ``text/plain`` is read by its columns.
"""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser

from app.importers.columns import table_column

Table = list[list[str]]  # rows of cell texts, the header row first
MAX_CELLS = 5_000_000  # a notebook's table holds a few thousand cells; stop collecting past this


class _TableCollector(HTMLParser):
    """Collects every ``<table>``'s rows of ``<th>``/``<td>`` texts (nested tables flatten)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[Table] = []
        self._depth = 0
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._cells = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._depth += 1
            self.tables.append([])
        elif tag == "tr" and self._depth:
            self._close_row()
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._close_cell()
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._close_cell()
        elif tag == "tr":
            self._close_row()
        elif tag == "table" and self._depth:
            self._close_row()
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def _close_cell(self) -> None:
        if self._cell is not None and self._row is not None and self._cells < MAX_CELLS:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cells += 1
        self._cell = None

    def _close_row(self) -> None:
        self._close_cell()
        if self._row and self.tables:
            self.tables[-1].append(self._row)
        self._row = None


def html_tables(html: str) -> list[Table]:
    """Every table in an HTML fragment, as rows of cell texts."""
    collector = _TableCollector()
    collector.feed(html)
    collector.close()
    return [t for t in collector.tables if t]


_SPLIT_HEADER = re.compile(r"\s{2,}")


def text_tables(text: str) -> list[Table]:
    """Tables printed as text (pandas' ``DataFrame`` repr): a header line naming a ``Step``
    column, then lines of as many values (plus pandas' index in front)."""
    tables: list[Table] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        header = _SPLIT_HEADER.split(lines[i].strip())
        if len(header) < 2 or not any(table_column(h) == "step" for h in header):
            i += 1
            continue
        table = [header]
        i += 1
        while i < len(lines):
            cells = lines[i].split()
            if len(cells) == len(header) + 1:
                cells = cells[1:]  # pandas' row index
            if len(cells) != len(header):
                break
            table.append(cells)
            i += 1
        if len(table) > 1:
            tables.append(table)
    return tables


def _number(cell: str) -> float | None:
    """A cell's number ("nan" and "inf" included: the checks need them), else None."""
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return None


def step_rows(table: Table, rename: dict[str, str]) -> list[tuple[int, dict[str, float]]]:
    """(step, metrics) for each row of a table with a step column; header names cleaned
    (``table_column``) and each change recorded in ``rename``. Cells that are not numbers
    ("No log") are left out; a row without a whole-number step is skipped."""
    names = [table_column(h) for h in table[0]]
    if "step" not in names:
        return []
    for header, name in zip(table[0], names):
        if name != header and name != "step":
            rename[header] = name
    at = names.index("step")
    out = []
    for cells in table[1:]:
        values = [_number(c) for c in cells]
        step = values[at] if at < len(values) else None
        if step is None or not math.isfinite(step) or step != int(step):
            continue
        metrics = {n: v for n, v in zip(names, values) if n != "step" and v is not None}
        out.append((int(step), metrics))
    return out
