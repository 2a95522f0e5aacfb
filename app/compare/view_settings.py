"""The reader's chart settings on the compare page, kept in the URL's query so they survive the
live refresh (the polled fragment is rendered with them), a reload, and a shared link.

``smooth=reward:0.6,kl:0.9`` (EMA weight per chart), ``log=kl,loss`` (charts with a log y axis),
``x=step|time|percent`` (the page's x axis) and ``hide=12,15`` (the runs hidden, by id: with
their checkbox or their legend entry). static/compare.js writes them into the address bar with
``history.replaceState`` and adds them to every live poll.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from fastapi import HTTPException
from starlette.datastructures import QueryParams

X_AXES = ("step", "time", "percent")
MAX_SMOOTHING = 0.99
MAX_NAME = 200


@dataclass(frozen=True)
class ViewSettings:
    smoothing: dict[str, float] = field(default_factory=dict)
    log: frozenset[str] = frozenset()
    x: str = "step"
    hidden: frozenset[int] = frozenset()

    def query(self) -> dict[str, str]:
        """The non-default settings as query parameters (for the fragment's URL)."""
        out = {}
        if self.smoothing:
            out["smooth"] = ",".join(f"{m}:{shown(v)}" for m, v in self.smoothing.items())
        if self.log:
            out["log"] = ",".join(sorted(self.log))
        if self.x != "step":
            out["x"] = self.x
        if self.hidden:
            out["hide"] = ",".join(str(i) for i in sorted(self.hidden))
        return out


def shown(value: float) -> str:
    """0.5 -> "0.5", 0.0 -> "0": as the slider and its output write it."""
    return f"{value:g}"


def _names(params: QueryParams, key: str) -> list[str]:
    names = [n.strip() for v in params.getlist(key) for n in v.split(",") if n.strip()]
    if any(len(n) > MAX_NAME for n in names):
        raise HTTPException(400, f"{key}: metric names are at most {MAX_NAME} characters")
    return names


def _smoothing(items: Sequence[str]) -> dict[str, float]:
    """``metric:weight`` items; the weight is the last ``:`` part (names may hold colons)."""
    out: dict[str, float] = {}
    for item in items:
        metric, sep, raw = item.rpartition(":")
        try:
            weight = float(raw)
        except ValueError:
            weight = math.nan
        if not sep or not metric or not 0 <= weight <= MAX_SMOOTHING:
            raise HTTPException(400, f"smooth must be metric:weight with a weight from 0 to "
                                     f"{MAX_SMOOTHING}, not {item[:60]!r}")
        if weight > 0:
            out[metric] = weight
    return out


def _hidden(items: Sequence[str]) -> frozenset[int]:
    """``hide``'s run ids (a run not compared is harmless: nothing to hide)."""
    bad = [item for item in items if not (item.isdigit() and len(item) <= 18)]
    if bad:
        raise HTTPException(400, f"hide must be run ids, not {bad[0][:20]!r}")
    return frozenset(int(item) for item in items)


def parse_view(params: QueryParams) -> ViewSettings:
    """The settings in a compare URL; a malformed one is a clear 400, not silently dropped."""
    x = params.get("x") or "step"
    if x not in X_AXES:
        raise HTTPException(400, f"x must be one of {', '.join(X_AXES)}, not {x[:20]!r}")
    return ViewSettings(_smoothing(_names(params, "smooth")), frozenset(_names(params, "log")), x,
                        _hidden(_names(params, "hide")))
