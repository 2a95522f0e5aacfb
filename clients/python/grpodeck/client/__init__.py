"""Report a TRL run you train yourself to GRPO Deck: ``callbacks=[DeckCallback(url=..., name=...)]``.

Needs only ``httpx``, ``pydantic`` and ``transformers`` (``pip install 'grpodeck-client[trl]'``,
clients/python).
``DeckCallback`` is loaded on first use, so ``grpodeck.client.spool`` (which the worker's Celery
process imports) does not drag ``transformers`` in with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpodeck.client.callback import DeckCallback

__all__ = ["DeckCallback"]


def __getattr__(name: str) -> Any:
    if name == "DeckCallback":
        from grpodeck.client.callback import DeckCallback

        return DeckCallback
    raise AttributeError(f"module 'grpodeck.client' has no attribute {name!r}")
