"""Plotly figures for the run page, built from series (no database access here)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from app.charts.panels import GROUP_TITLES, Panel, names_for, panels_for, title_for
from app.charts.wall_clock import sample_times, stamps, step_texts, to_wall_clock
from app.core.logged_names import with_logged
from app.metrics.reading import titled
from app.metrics.samples import Samples
from app.metrics.series import Series, all_finite, downsample

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
PLAIN_AXIS: dict[str, Any] = {"gridcolor": "#eef0f3", "zeroline": False,
                              "title": {"font": {"size": 11}}}
# The chart's title is an HTML heading above it (static/charts.js adds no plotly title), so the
# legend sits above the plot, where it can neither cover the "step" title nor the data; it is
# shown for a single series too, so every chart names what it draws.
PLAIN_LAYOUT: dict[str, Any] = {
    "margin": {"l": 56, "r": 16, "t": 8, "b": 40}, "height": 260,
    "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom",
               "font": {"size": 10}},
    "showlegend": True, "hovermode": "x unified", "uirevision": "keep",
    "plot_bgcolor": "white", "paper_bgcolor": "white",
    "xaxis": {**PLAIN_AXIS, "title": {"text": "step", "font": {"size": 11}, "standoff": 4},
              "unifiedhovertitle": {"text": "step %{x}"}},
}
PERCENT_TICKS: dict[str, Any] = {"tickformat": ".1~%", "rangemode": "tozero"}
MARKERS_UP_TO = 50  # above this many points a line reads better without its markers
MARK_COLORS = {"critical": "rgba(220,38,38,0.15)", "warning": "rgba(234,179,8,0.18)"}

# Non-finite values (a diverging run logs NaN/inf) are gaps in their line, and a red marker on a
# hidden 0..1 axis shows where: inf at the top, -inf at the bottom, NaN in the middle.
NONFINITE_TRACE = "NaN/inf"
NONFINITE_Y = {"NaN": 0.5, "inf": 0.95, "-inf": 0.05}
NONFINITE_AXIS: dict[str, Any] = {"overlaying": "y", "range": [0, 1], "visible": False,
                                  "fixedrange": True}
MAX_NOTE_STEPS = 8  # steps listed per metric and kind under a chart; the rest are counted
MAX_MARKERS = 1_000  # a run that diverged for good draws an evenly thinned row of markers


def plot_text(text: str) -> str:
    """Text for a plotly title, legend entry or hover label, escaped.

    Plotly renders a subset of HTML in those strings (``<a href>`` becomes a live link, ``<b>``,
    ``<br>``...) and decodes entities, so a metric or run name taken as is could put a link or
    markup inside a chart; escaped, it is shown literally, exactly as it was logged."""
    return html.escape(text, quote=False)


def nonfinite_kind(value: float) -> str:
    return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")


RAW_HOVER = "%{y:.4~g} (raw)"
BAND_HOVER = ("%{y:.4~g} (mean of %{customdata[2]} steps, band min-max "
              "%{customdata[0]:.4~g} to %{customdata[1]:.4~g})")


def _finite(values: Sequence[float]) -> list[float | None]:
    if all_finite(values):
        return list(values)
    return [v if math.isfinite(v) else None for v in values]


def _trace(name: str, series: Series, secondary: bool) -> list[dict[str, Any]]:
    """One metric's line; non-finite values become gaps (null: JSON has no NaN). A summary
    (static/chartkit.js draws the same from the zoom endpoint) is a shaded min-max band, meta
    "band", under its mean line, whose tooltip says it is a mean and of how many steps."""
    values = _finite(series.values)
    mode = "lines+markers" if len(values) <= MARKERS_UP_TO else "lines"
    axis = "y2" if secondary else "y"
    # the name as shown, escaped; legendgroup keeps the metric's own name (static/charts.js
    # asks the API for it)
    line: dict[str, Any] = {"type": "scatter", "x": series.steps, "y": values,
                            "name": plot_text(name), "legendgroup": name, "mode": mode,
                            "marker": {"size": 4}, "yaxis": axis, "hovertemplate": RAW_HOVER}
    if not series.summarised:
        return [line]
    edge = {"type": "scatter", "x": series.steps, "mode": "lines", "line": {"width": 0},
            "meta": "band", "legendgroup": name, "showlegend": False, "hoverinfo": "skip",
            "yaxis": axis, "name": plot_text(f"{name} min-max")}
    lows, highs = _finite(series.lows or []), _finite(series.highs or [])
    line["customdata"] = [[lo, hi, n] for lo, hi, n in
                          zip(lows, highs, series.counts or [], strict=True)]
    line["hovertemplate"] = BAND_HOVER
    return [{**edge, "y": lows}, {**edge, "y": highs, "fill": "tonexty"}, line]


def nonfinite_points(names: Sequence[str], series: dict[str, Series]) -> list[tuple[str, int, str]]:
    """(metric, step, kind) for every non-finite value of the named series."""
    return [(name, step, nonfinite_kind(v)) for name in names
            if not all_finite(series[name].values)
            for step, v in zip(series[name].steps, series[name].values, strict=True)
            if not math.isfinite(v)]


def nonfinite_trace(points: list[tuple[str, int, str]]) -> dict[str, Any]:
    points = points[::math.ceil(len(points) / MAX_MARKERS)]
    return {"type": "scatter", "x": [s for _, s, _ in points],
            "y": [NONFINITE_Y[k] for _, _, k in points], "yaxis": "y3",
            "name": NONFINITE_TRACE, "meta": "nonfinite", "mode": "markers+text",
            "text": [k for _, _, k in points], "textposition": "top center",
            "textfont": {"size": 9, "color": "#b91c1c"},
            "marker": {"symbol": "x", "size": 9, "color": "#dc2626"},
            "hovertext": [plot_text(f"{n}: {k} at step {s}") for n, s, k in points],
            "hoverinfo": "text"}


def nonfinite_note(points: list[tuple[str, int, str]], several: bool) -> str | None:
    """'3 non-finite values: NaN at steps 12, 13; inf at 40' (with metric names when a chart
    draws several metrics)."""
    if not points:
        return None
    groups: dict[tuple[str, str], list[int]] = {}
    for name, step, kind in points:
        groups.setdefault((name, kind), []).append(step)
    parts = []
    for (name, kind), steps in groups.items():
        shown = ", ".join(str(s) for s in steps[:MAX_NOTE_STEPS])
        more = f" and {len(steps) - MAX_NOTE_STEPS} more" if len(steps) > MAX_NOTE_STEPS else ""
        label = f"{kind} in {name}" if several else kind
        parts.append(f"{label} at step{'s' if len(steps) > 1 else ''} {shown}{more}")
    count = len(points)
    return f"{count} non-finite value{'s' if count > 1 else ''}: {'; '.join(parts)}"


def _mark(mark: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A shaded step range and its label, in plotly.js layout terms."""
    shape = {"type": "rect", "xref": "x", "yref": "paper", "x0": mark["x0"], "x1": mark["x1"],
             "y0": 0, "y1": 1, "fillcolor": MARK_COLORS.get(mark["severity"], MARK_COLORS["warning"]),
             "line": {"width": 0}, "layer": "below"}
    note = {"xref": "x", "yref": "paper", "x": mark["x0"], "y": 1, "text": mark["label"],
            "showarrow": False, "xanchor": "left", "yanchor": "top", "font": {"size": 9}}
    return shape, note


def mark_layout(marks: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A chart's findings as its layout's ``shapes`` and ``annotations`` (nothing else of a
    chart's layout uses them: a live page replaces both when only the findings changed)."""
    shapes_notes = [_mark(m) for m in marks]
    return {"shapes": [shape for shape, _ in shapes_notes],
            "annotations": [note for _, note in shapes_notes]}


def _layout(panel: Panel, secondary: bool) -> dict[str, Any]:
    """Axes that say what they hold: a titled left axis, percent ticks for shares, and a titled
    0-100 % right axis whose ticks fall on quarters (not plotly's odd fractions)."""
    yaxis: dict[str, Any] = {**PLAIN_AXIS, "title": {"text": panel.y_title, "font": {"size": 11}}}
    if panel.percent:
        yaxis.update(PERCENT_TICKS)
    layout: dict[str, Any] = {**PLAIN_LAYOUT, "yaxis": yaxis}
    if panel.byte_ticks:  # static/charts.js writes the ticks in binary units for the range shown
        layout["meta"] = {"byte_ticks": True}
    if secondary:
        layout["yaxis2"] = {"overlaying": "y", "side": "right", "range": [0, 1.02],
                            "tickvals": [0, 0.25, 0.5, 0.75, 1], "tickformat": ".0%",
                            "showgrid": False, "zeroline": False,
                            "title": {"text": panel.y2_title, "font": {"size": 11}}}
        layout["margin"] = {**PLAIN_LAYOUT["margin"], "r": 56}
    return layout


def _sampled_trace(name: str, samples: Samples, secondary: bool,
                   max_points: int) -> list[dict[str, Any]]:
    """One metric's samples, each at its time (ms), its step in the tooltip."""
    xs, ys = samples.points[name]
    traces = _trace(name, downsample(Series(xs, ys), max_points), secondary)
    for trace in traces:
        trace["text"] = step_texts(trace["x"], samples)
        trace["hovertemplate"] += " · %{text}"
    return traces


def figure(panel: Panel, series: dict[str, Series],
           marks: list[dict[str, Any]] | None = None, samples: Samples | None = None,
           max_points: int = 2_000) -> dict[str, Any] | None:
    """One chart, or None when the run logged none of the panel's metrics (e.g. kl at beta 0).

    ``marks`` are step ranges to shade (findings), each {x0, x1, label, severity}. A system
    metric is drawn from ``samples`` where they hold it (each sample at its time, at most
    ``max_points``: an evaluation's samples, all at one step, each drawn), else from its steps'
    values placed on the clock between the stamps around them (an older client, a value logged
    without ``system/time``). ``layout.meta.samples`` names the metrics drawn from samples:
    static/charts.js appends their new samples by time.
    """
    primary, secondary = names_for(panel, sorted(series))
    if not primary and not secondary:
        return None
    kept = samples if panel.group == "system" and samples is not None else Samples()
    by_sample = [n for n in primary + secondary if n in kept.points]
    by_step = [n for n in primary + secondary if n not in kept.points]
    layout = {**_layout(panel, bool(secondary)), **mark_layout(marks or [])}
    data = [t for n in primary + secondary for t in (
        _sampled_trace(n, kept, n in secondary, max_points) if n in kept.points
        else _trace(n, series[n], n in secondary))]
    points = nonfinite_points(by_step, series)
    if points:
        data.append(nonfinite_trace(points))
        layout["yaxis3"] = NONFINITE_AXIS
    drawn = {"data": data, "layout": layout}
    times = stamps(series) if panel.group == "system" else None
    if by_sample:
        to_wall_clock(drawn, times or sample_times(kept), skip=frozenset(by_sample))
        layout["meta"]["samples"] = by_sample
    elif times is not None:
        to_wall_clock(drawn, times)
    return drawn


def marks_by_panel(findings: list[dict[str, Any]], objectives: Sequence[str] = ()
                   ) -> dict[str, list[dict[str, Any]]]:
    """Step ranges of warning/critical findings, on the first panel that draws their metric."""
    out: dict[str, list[dict[str, Any]]] = {}
    for f in findings:
        if f["severity"] == "info" or not f.get("metric"):
            continue
        for panel in panels_for(objectives):
            primary, secondary = names_for(panel, [f["metric"]])
            if primary or secondary:
                x1 = f["last_step"] if f["last_step"] > f["first_step"] else f["first_step"] + 0.5
                out.setdefault(panel.key, []).append(
                    {"x0": f["first_step"], "x1": x1, "label": f["category"],
                     "severity": f["severity"]})
                break
    return out


def name_logged_keys(fig: dict[str, Any], logged: Mapping[str, str]) -> None:
    """Legend entries of renamed metrics name the key logged too (``learning_rate (lr)``);
    ``legendgroup`` keeps the canonical name, which static/charts.js asks the API by."""
    for trace in fig["data"]:
        group = trace.get("legendgroup")
        if isinstance(group, str) and group in logged:
            band = " min-max" if trace.get("meta") == "band" else ""
            trace["name"] = plot_text(with_logged(group, logged) + band)


def run_figures(series: dict[str, Series],
                marks: dict[str, list[dict[str, Any]]] | None = None,
                objectives: Sequence[str] = (), samples: Samples | None = None,
                max_points: int = 2_000,
                logged: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """All charts a run has data for, each as {key, title, figure, note, log_toggle, group,
    group_title}; the note lists the chart's non-finite values (None when all are finite);
    ``group_title`` is set on the first chart of a group that has one (the system metrics).
    ``objectives``: the run's monitor-only rewards, drawn against the trained reward on a chart
    of their own. ``samples``: the run's system samples at their own times (``figure``).
    ``logged``: canonical name -> the key the run logged it as, shown beside it in the title
    and the legend (``app.metrics.reading.run_logged_names``)."""
    out: list[dict[str, Any]] = []
    logged = logged or {}
    for panel in panels_for(objectives):
        fig = figure(panel, series, (marks or {}).get(panel.key), samples, max_points)
        if fig is not None:
            primary, secondary = names_for(panel, sorted(series))
            note = nonfinite_note(nonfinite_points(primary + secondary, series),
                                  several=len(primary) + len(secondary) > 1)
            opens = not out or out[-1]["group"] != panel.group
            name_logged_keys(fig, logged)
            title = titled(title_for(panel, sorted(series)), primary + secondary, logged)
            out.append({"key": panel.key, "title": title,
                        "figure": fig, "note": note, "log_toggle": panel.log_toggle,
                        "group": panel.group,
                        "group_title": GROUP_TITLES.get(panel.group) if opens else None})
    return out
