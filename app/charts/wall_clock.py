"""System charts against wall-clock time, not steps.

Memory and CPU are read by the clock: a leak climbs per hour, and an eval pass, a checkpoint
save or a stall spends minutes inside one step, where a step axis shows nothing. The client's
sampler stamps each sample with ``system/time`` (Unix seconds, ``grpodeck.client.system``), so
a system chart's steps become times: the sample's own stamp, or for a step between two stamps
(a summary's bucket, a metric sampled on another row) the time interpolated between them.
The step stays in each point's tooltip. A run without stamps (an import, an older client)
keeps the step axis. A stamp outside 2000-2100 (``PLAUSIBLE``) is no clock reading: left out,
so one such value cannot stretch the axis over centuries.

Samples the Deck kept at their own time (``app/metrics/samples.py``) are drawn as they are,
one point per sample: the samples of an evaluation, all at one step, each at its time.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from app.metrics.samples import PLAUSIBLE, TIME, Samples
from app.metrics.series import Series

AXIS: dict[str, Any] = {"type": "date", "title": {"text": "wall-clock (UTC)",
                                                  "font": {"size": 11}, "standoff": 4},
                        "unifiedhovertitle": {"text": "%{x|%Y-%m-%d %H:%M:%S} UTC"}}


def stamps(series: dict[str, Series]) -> tuple[np.ndarray, np.ndarray] | None:
    """(steps, milliseconds since the epoch) of the run's plausible time stamps, in step
    order; None when it has none."""
    s = series.get(TIME)
    if s is None:
        return None
    pairs = sorted((float(x), v * 1000.0) for x, v in zip(s.steps, s.values, strict=True)
                   if math.isfinite(v) and PLAUSIBLE[0] <= v <= PLAUSIBLE[1])
    if not pairs:
        return None
    steps, ms = zip(*pairs, strict=True)
    return np.asarray(steps), np.asarray(ms)


def to_wall_clock(figure: dict[str, Any], times: tuple[np.ndarray, np.ndarray],
                  skip: frozenset[str] = frozenset()) -> None:
    """Rewrite ``figure``'s x values (steps) as times, in place; each line's tooltip keeps its
    step, and the layout says the axis is time (``meta.time_axis``: static/charts.js leaves
    such a chart out of the step-linked zoom). ``skip``: metrics whose lines are at their
    samples' times already (``legendgroup``)."""
    steps, ms = times
    for trace in figure["data"]:
        x = trace.get("x")
        if not x or trace.get("legendgroup") in skip:
            continue
        trace["x"] = [float(t) for t in np.interp(np.asarray(x, dtype=float), steps, ms)]
        if "text" not in trace:  # the NaN/inf markers already say their step in their text
            trace["text"] = [f"step {int(s)}" for s in x]
            if "hovertemplate" in trace:
                trace["hovertemplate"] += " · %{text}"
    clock_layout(figure["layout"], times)


def clock_layout(layout: dict[str, Any], times: tuple[np.ndarray, np.ndarray]) -> None:
    """``layout``'s axis as time and its finding marks at their steps' times, in place."""
    for shape in layout.get("shapes", []):  # a finding's step range, shaded
        shape["x0"], shape["x1"] = _at(shape["x0"], times), _at(shape["x1"], times)
    for note in layout.get("annotations", []):
        note["x"] = _at(note["x"], times)
    layout["xaxis"] = {**layout.get("xaxis", {}), **AXIS}
    layout["meta"] = {**layout.get("meta", {}), "time_axis": True}


def sample_times(samples: Samples) -> tuple[np.ndarray, np.ndarray]:
    """(steps, ms) of the samples kept at their own times, for placing a step on the clock."""
    return np.asarray(samples.steps, dtype=float), np.asarray(samples.times, dtype=float)


def step_texts(times_ms: list[float], samples: Samples) -> list[str]:
    """The tooltip text of each drawn sample: the step it was taken at."""
    at = samples.step_at()
    return [f"step {at.get(int(t), '?')}" for t in times_ms]


def _at(step: float, times: tuple[np.ndarray, np.ndarray]) -> float:
    """The time (ms) of ``step``, between the stamps around it."""
    return float(np.interp(float(step), *times))
