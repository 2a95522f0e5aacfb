"""A user's reward module opened by a module prefix in ``GRPODECK_CUSTOM_REWARDS``: it defines
one reward and, like most modules, imports other names (issue 33: ``mod:run`` opened
``subprocess.run`` through a prefix)."""

from __future__ import annotations

from subprocess import run  # noqa: F401 - imported, never allowed as a reward
from typing import Any


def length(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
    """The completion's length: a function this module defines."""
    return [float(len(str(c))) for c in completions]
