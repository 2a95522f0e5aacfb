"""A reward function importable on the worker, for the ``custom`` reward's tests."""

from __future__ import annotations

from typing import Any

from grpodeck.contract.text import completion_text


def shout(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
    """1 for an all-caps completion: a stand-in for a user's own module:function (plain text or
    chat messages, as TRL passes either)."""
    return [1.0 if completion_text(c).isupper() else 0.0 for c in completions]
