"""A module that must never be imported by a refused ``custom`` reward: importing it marks it."""

from __future__ import annotations

import os

os.environ["GRPODECK_TEST_PLANTED_IMPORTED"] = "1"


def score(completions: list[str], **_: object) -> list[float]:
    """Would reward everything: it is not on the allow-list, so no run may call it."""
    return [1.0] * len(completions)
