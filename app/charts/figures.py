"""Plotly figures for the run page, built from series (no database access here)."""

from __future__ import annotations

from typing import Any

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


# The run page is polled while a run is live, so its figures are plain plotly.js JSON built
# directly: plotly's Python validators cost ~1 s per 40k points, for nothing plotly.js needs.
PLAIN_AXIS: dict[str, Any] = {"gridcolor": "#eef0f3", "zeroline": False}
PLAIN_LAYOUT: dict[str, Any] = {
    **{k: v for k, v in LAYOUT.items() if k != "template"},
    "plot_bgcolor": "white", "paper_bgcolor": "white",
    "xaxis": {**LAYOUT["xaxis"], **PLAIN_AXIS}, "yaxis": dict(PLAIN_AXIS),
}
MARK_COLORS = {"critical": "rgba(220,38,38,0.15)", "warning": "rgba(234,179,8,0.18)"}


def _trace(name: str, series: Series, secondary: bool) -> dict[str, Any]:
    return {"type": "scatter", "x": series.steps, "y": series.values, "name": name,
            "mode": "lines+markers", "marker": {"size": 4}, "yaxis": "y2" if secondary else "y"}


def _mark(mark: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A shaded step range and its label, in plotly.js layout terms."""
    shape = {"type": "rect", "xref": "x", "yref": "paper", "x0": mark["x0"], "x1": mark["x1"],
             "y0": 0, "y1": 1, "fillcolor": MARK_COLORS.get(mark["severity"], MARK_COLORS["warning"]),
             "line": {"width": 0}, "layer": "below"}
    note = {"xref": "x", "yref": "paper", "x": mark["x0"], "y": 1, "text": mark["label"],
            "showarrow": False, "xanchor": "left", "yanchor": "top", "font": {"size": 9}}
    return shape, note


def figure(panel: Panel, series: dict[str, Series],
           marks: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """One chart, or None when the run logged none of the panel's metrics (e.g. kl at beta 0).

    ``marks`` are step ranges to shade (findings), each {x0, x1, label, severity}.
    """
    primary, secondary = names_for(panel, sorted(series))
    if not primary and not secondary:
        return None
    layout: dict[str, Any] = {**PLAIN_LAYOUT, "title": {"text": panel.title, "font": {"size": 14},
                                                        "x": 0.02, "xanchor": "left"}}
    if secondary:
        layout["yaxis2"] = {"overlaying": "y", "side": "right", "range": [0, 1.05],
                            "showgrid": False}
    shapes_notes = [_mark(m) for m in marks or []]
    layout["shapes"] = [shape for shape, _ in shapes_notes]
    layout["annotations"] = [note for _, note in shapes_notes]
    data = ([_trace(n, series[n], False) for n in primary]
            + [_trace(n, series[n], True) for n in secondary])
    return {"data": data, "layout": layout}


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
