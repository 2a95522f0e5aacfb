"""Plotly figures for the rollout inspector (no database access here)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from app.charts.figures import LAYOUT

OUTCOME_COLORS = {"all_fail": "#dc2626", "mixed": "#16a34a", "all_pass": "#2563eb",
                  "no_total": "#9ca3af"}
OUTCOME_LABELS = {"all_fail": "all fail (no signal)", "mixed": "mixed (learning signal)",
                  "all_pass": "all pass (no signal)",
                  "no_total": "no total sent (no spread; pass/fail unknown)"}


def outcomes_figure(shares: dict[int, dict[str, float]]) -> dict[str, Any] | None:
    """Stacked shares of group outcomes per captured step: mixed is the seed's sweet spot.
    Groups sent without totals and without spread are a band of their own, drawn only when a
    step has any (they are neither a failure nor a pass)."""
    if not shares:
        return None
    steps = list(shares)
    kinds = ["all_fail", "mixed", "all_pass"]
    if any(shares[s].get("no_total") for s in steps):
        kinds.append("no_total")
    fig = go.Figure([
        go.Scatter(x=steps, y=[shares[s].get(k, 0.0) for s in steps], name=OUTCOME_LABELS[k],
                   stackgroup="one", mode="lines", line={"color": OUTCOME_COLORS[k]})
        for k in kinds])
    fig.update_layout(title={"text": "Group outcomes", "font": {"size": 14}}, **LAYOUT)
    fig.update_layout(yaxis={"range": [0, 1], "tickformat": ".0%"})
    return fig.to_plotly_json()


def advantages_figure(by_step: dict[int, list[float]]) -> dict[str, Any] | None:
    """Distribution of group-relative advantages per captured step (a box per step)."""
    if not by_step:
        return None
    xs = [s for s, values in by_step.items() for _ in values]
    ys = [v for values in by_step.values() for v in values]
    fig = go.Figure([go.Box(x=xs, y=ys, name="advantage", marker={"color": "#4f46e5"},
                            boxpoints=False)])
    fig.update_layout(title={"text": "Advantage distribution", "font": {"size": 14}}, **LAYOUT)
    return fig.to_plotly_json()
