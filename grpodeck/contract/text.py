"""How a prompt or completion becomes text, written once for the worker, the importer and rewards.

TRL hands over plain strings for text datasets and message lists for chat datasets; a parquet
round-trip turns lists into numpy arrays. Every side renders them here so a prompt looks the same
whichever way it arrived, and cuts it at the same cap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpodeck.contract.limits import MAX_TEXT_CHARS


def _content_text(content: Any) -> str:
    """Message content is a string or a list of typed parts (multimodal): keep the text."""
    if isinstance(content, str):
        return content
    if hasattr(content, "tolist"):  # numpy arrays after a parquet round-trip
        content = content.tolist()
    if isinstance(content, Sequence):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def render_messages(value: Any, roles: bool = True) -> str:
    """Plain text of a prompt/completion: strings as-is, chat messages as ``role: content``
    lines (``roles=False`` joins the contents only, e.g. a single assistant completion)."""
    if isinstance(value, str):
        return value
    if hasattr(value, "tolist"):  # numpy arrays of message dicts (parquet round-trips)
        value = value.tolist()
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, Sequence):
        msgs = [m for m in value if isinstance(m, dict)]
        if roles:
            return "\n".join(f"{m.get('role', '?')}: {_content_text(m.get('content'))}" for m in msgs)
        return "".join(_content_text(m.get("content")) for m in msgs)
    return "" if value is None else str(value)


def completion_text(completion: Any) -> str:
    """A completion's text without role labels: what a reward scores and the inspector shows."""
    return render_messages(completion, roles=False)


def clip(text: str) -> str:
    """``text`` cut to the completion text cap (``MAX_TEXT_CHARS``)."""
    return text[:MAX_TEXT_CHARS]
