"""Parameter kinds for the issue-10 rewards: each parses what the form sends (text) or the API
sends (JSON) and raises ValueError with the reason, so a bad parameter is refused at launch."""

from __future__ import annotations

import re
from typing import Any

READY_PATTERNS = {"think-answer": r"\s*<think>.*?</think>\s*<answer>.*?</answer>\s*",
                  "answer-only": r"\s*<answer>.*?</answer>\s*"}
MATCH_MODES = ("exact", "numeric")
IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
COLUMN = re.compile(r"^[A-Za-z_]\w{0,63}$")
TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def flag(raw: Any) -> bool:
    """true/false (also 1/0, yes/no, on/off): ``bool("false")`` would be True."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in TRUE or text in FALSE:
        return text in TRUE
    raise ValueError("true or false")


def regular_expression(raw: Any) -> str:
    """A pattern that compiles, or the name of a ready one (think-answer, answer-only)."""
    pattern = READY_PATTERNS.get(str(raw), str(raw))
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"a valid regular expression ({exc})") from None
    return pattern


def match_mode(raw: Any) -> str:
    if str(raw) not in MATCH_MODES:
        raise ValueError(f"one of {', '.join(MATCH_MODES)}")
    return str(raw)


def import_path(raw: Any) -> str:
    """``package.module:function``; only its shape here: whether it imports is the worker's."""
    path = str(raw).strip()
    if not IMPORT_PATH.match(path):
        raise ValueError("like package.module:function")
    return path


def column_name(raw: Any) -> str:
    name = str(raw).strip()
    if not COLUMN.match(name):
        raise ValueError("a dataset column name (letters, digits, _)")
    return name
