"""A reward function importable on the worker, for the ``custom`` reward's tests."""

from __future__ import annotations

from typing import Any


def shout(prompts: list[Any], completions: list[str], **_: Any) -> list[float]:
    """1 for an all-caps completion: a stand-in for a user's own module:function."""
    return [1.0 if c.isupper() else 0.0 for c in completions]
