"""How a canonical metric name shows the key a run logged it under (``learning_rate (lr)``):
pure string helpers, here at the ground floor because the template filter
(``app.core.templating``) and the metric readers (``app.metrics.reading``) both use them
(issue 56: keep the user's own name visible beside the canonical one)."""

from __future__ import annotations

from collections.abc import Mapping


def logged_names(renames: Mapping[str, str]) -> dict[str, str]:
    """Canonical name -> the key(s) a run logged it as (``{"learning_rate": "lr"}``), from a
    reading's ``renames``: what the pages show beside a renamed key's canonical name, so the
    user still finds the name they logged (issue 56)."""
    keys: dict[str, list[str]] = {}
    for key, name in sorted(renames.items()):
        if key != name:
            keys.setdefault(name, []).append(key)
    return {name: ", ".join(found) for name, found in keys.items()}


def with_logged(name: str, logged: Mapping[str, str]) -> str:
    """``learning_rate (lr)`` for a renamed key, else the name as it is."""
    return f"{name} ({logged[name]})" if name in logged else name
