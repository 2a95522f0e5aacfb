"""Report a run you train yourself to GRPO Deck: ``run = init(url=..., name=...)`` then
``run.log({...}, step=N)`` and ``run.finish()`` from any loop, or
``callbacks=[DeckCallback(url=..., name=...)]`` in a TRL script.

Needs only ``httpx``, ``pydantic`` and ``psutil`` (``DeckCallback`` also ``transformers``:
``pip install 'grpodeck-client[trl]'``, clients/python).
Names are loaded on first use, so ``grpodeck.client.spool`` (which the worker's Celery process
imports) does not drag ``transformers`` in with it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpodeck.client.callback import DeckCallback
    from grpodeck.client.run import DeckRefused, DeckUnavailable, Run, init

__all__ = ["DeckCallback", "DeckRefused", "DeckUnavailable", "Run", "init"]
_HOMES = {"DeckCallback": "callback", "DeckRefused": "run", "DeckUnavailable": "run",
          "Run": "run", "init": "run"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(import_module(f"grpodeck.client.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'grpodeck.client' has no attribute {name!r}")
