"""Issue 55: a console log's printed samples are full of braces (LaTeX ``\\frac{1}{2}``, chat
templates), and each ``{`` was parsed as a possible metrics dict: a 19 MB OpenRLHF log with its
samples made 1.2M ``literal_eval`` calls (17 s to read). Only a brace before a quoted key can
open a printed dict, so only those are parsed."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from app.importers.console import _literal_at, parse

SAMPLE = "\\boxed{\\frac{1}{2}} and {x} " * 200


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text ``literal_eval`` was asked to read."""
    seen: list[str] = []
    read = ast.literal_eval

    def counted(text: Any) -> Any:
        seen.append(text)
        return read(text)

    monkeypatch.setattr(ast, "literal_eval", counted)
    return seen


def test_a_samples_braces_cost_no_parse_and_do_not_hide_the_dict(parses: list[str]) -> None:
    line = f"{SAMPLE} {{'loss': 0.5, 'reward': 1.0}}"
    assert _literal_at(line) == {"loss": 0.5, "reward": 1.0}  # past 800 braces (64 were tried)
    assert len(parses) == 1


def test_a_log_of_samples_parses_one_dict_per_step(parses: list[str]) -> None:
    text = "\n".join(f"{SAMPLE}\n{{'step': {s}, 'loss': 0.1, 'reward': 0.5}}" for s in range(9))
    assert [s for s, _ in parse(text, "f.log").rows] == list(range(9))
    assert len(parses) == 9


@pytest.mark.parametrize("opening", ["{'", '{"', "{ '", "{('", "{u'", "{r'"])
def test_every_way_a_string_key_opens_a_dict_is_still_tried(opening: str) -> None:
    quote = opening[-1]
    line = f"x {opening}loss{quote}{')' if '(' in opening else ''}: 2.0}}"
    assert _literal_at(line) == {"loss": 2.0}
