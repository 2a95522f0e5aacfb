"""The one parser of a user's key mapping (``--map``), for the CLI, the upload API and the form.

Why one: the upload route used to join a repeated ``map`` form field with spaces and parse
the result as one comma-separated string, so ``--map A=a --map B=b`` stored one metric named
``a B=b``. Every way a mapping arrives goes through :func:`parse_map`: a list of items (a
repeated option or form field), each of which may itself hold several pairs separated by
commas or new lines (the form's text box).
"""

from __future__ import annotations

from collections.abc import Iterable

from app.metrics.names import parse_mapping

MAX_MAPPING = 2000  # characters in all: a mapping is a few KEY=NAME pairs


def split_items(items: Iterable[str] | str | None) -> list[str]:
    """Every ``KEY=NAME`` item of a repeated option, each item split on commas and new lines."""
    if items is None:
        return []
    if isinstance(items, str):
        items = [items]
    return [part for item in items for line in item.splitlines() for part in line.split(",")]


def parse_map(items: Iterable[str] | str | None) -> dict[str, str]:
    """``["A=a", "B=b, C=c"]`` -> ``{"A": "a", "B": "b", "C": "c"}`` (names canonical).

    Raises ValueError naming the malformed item, or saying the mapping is too long."""
    parts = split_items(items)
    if sum(len(p) + 1 for p in parts) > MAX_MAPPING:
        raise ValueError(f"longer than {MAX_MAPPING} characters")
    return parse_mapping(parts)


def as_text(mapping: dict[str, str]) -> str:
    """The mapping as the form's text box and a run's spec show it: ``A=a, B=b``."""
    return ", ".join(f"{k}={v}" for k, v in sorted(mapping.items()))
