"""Plotly figures for the run page, built from series (no database access here)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from app.charts.panels import PANELS, Panel, names_for
from app.metrics.series import Series

LAYOUT: dict[str, Any] = {
    "margin": {"l": 50, "r": 50, "t": 36, "b": 36},
    "height": 260,
    "legend": {"orientation": "h", "y": -0.25, "font": {"size": 10}},
    "uirevision": "keep",  # live refreshes keep the user's zoom
    "template": "plotly_white",
    "xaxis": {"title": {"text": "step"}},
}


def _trace(name: str, series: Series, secondary: bool) -> go.Scatter:
    return go.Scatter(x=series.steps, y=series.values, name=name, mode="lines+markers",
                      marker={"size": 4}, yaxis="y2" if secondary else "y")


def figure(panel: Panel, series: dict[str, Series],
           marks: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """One chart, or None when the run logged none of the panel's metrics (e.g. kl at beta 0).

    ``marks`` are step ranges to shade (findings), each {x0, x1, label, severity}.
    """
    primary, secondary = names_for(panel, sorted(series))
    if not primary and not secondary:
        return None
    fig = go.Figure([_trace(n, series[n], False) for n in primary]
                    + [_trace(n, series[n], True) for n in secondary])
    fig.update_layout(title={"text": panel.title, "font": {"size": 14}}, **LAYOUT)
    if secondary:
        fig.update_layout(yaxis2={"overlaying": "y", "side": "right", "range": [0, 1.05],
                                  "showgrid": False})
    for mark in marks or []:
        color = "rgba(220,38,38,0.15)" if mark["severity"] == "critical" else "rgba(234,179,8,0.18)"
        fig.add_vrect(x0=mark["x0"], x1=mark["x1"], fillcolor=color, line_width=0,
                      annotation_text=mark["label"], annotation_position="top left",
                      annotation_font_size=9)
    return fig.to_plotly_json()


def marks_by_panel(findings: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Step ranges of warning/critical findings, on the panel that draws their metric."""
    out: dict[str, list[dict[str, Any]]] = {}
    for f in findings:
        if f["severity"] == "info" or not f.get("metric"):
            continue
        for panel in PANELS:
            primary, secondary = names_for(panel, [f["metric"]])
            if primary or secondary:
                x1 = f["last_step"] if f["last_step"] > f["first_step"] else f["first_step"] + 0.5
                out.setdefault(panel.key, []).append(
                    {"x0": f["first_step"], "x1": x1, "label": f["category"],
                     "severity": f["severity"]})
                break
    return out


def run_figures(series: dict[str, Series],
                marks: dict[str, list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """All charts a run has data for, each as {key, title, figure}."""
    out = []
    for panel in PANELS:
        fig = figure(panel, series, (marks or {}).get(panel.key))
        if fig is not None:
            out.append({"key": panel.key, "title": panel.title, "figure": fig})
    return out
