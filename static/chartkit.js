// Shared chart helpers (run page: static/charts.js).
//
// A zoomed chart must draw the data that is there: after the reader zooms, the visible step
// range is fetched again from GET /api/runs/{id}/chart, which answers raw points (level 0) when
// they fit the chart's point budget and otherwise one mean per bucket with its min and max.
// A summary is drawn as a shaded min-max band under its mean line (the same traces as
// app/charts/figures.py builds for the first render), never as a line through the extremes.
window.ChartKit = (function () {
  "use strict";
  var RAW_HOVER = "%{y:.4~g} (raw)";
  var BAND_HOVER = "%{y:.4~g} (mean of %{customdata[2]} steps, band min-max " +
    "%{customdata[0]:.4~g} to %{customdata[1]:.4~g})";
  var DEBOUNCE_MS = 250;  // one fetch after the last relayout of a drag or a scroll-zoom

  // NaN/inf arrive as strings ("nan", "inf"): gaps in a line.
  function finite(values) {
    return values.map(function (v) { return typeof v === "number" ? v : null; });
  }

  // The traces of one metric from the endpoint's series {steps, values[, min, max, n]}:
  // [line] for raw points, [low edge, high edge (filled), mean line] for a summary. ``line``
  // is the drawn line it replaces: its name, axis and style are kept.
  function seriesTraces(line, s) {
    var mean = Object.assign({}, line, { x: s.steps.slice(), y: finite(s.values) });
    delete mean.customdata;
    if (!s.min) return [Object.assign(mean, { hovertemplate: RAW_HOVER })];
    var lows = finite(s.min), highs = finite(s.max);
    mean.customdata = lows.map(function (lo, i) { return [lo, highs[i], s.n[i]]; });
    mean.hovertemplate = BAND_HOVER;
    var edge = { type: "scatter", x: s.steps.slice(), mode: "lines", line: { width: 0 },
                 meta: "band", legendgroup: line.legendgroup || line.name, showlegend: false,
                 hoverinfo: "skip",
                 yaxis: line.yaxis, name: line.name + " min-max" };
    return [Object.assign({}, edge, { y: lows }),
            Object.assign({}, edge, { y: highs, fill: "tonexty" }), mean];
  }

  // ``fn`` once, DEBOUNCE_MS after the last of a burst of calls (with that call's arguments).
  function debounce(fn, ms) {
    var timer = null;
    return function () {
      var args = arguments;
      clearTimeout(timer);
      timer = setTimeout(function () { fn.apply(null, args); }, ms === undefined ? DEBOUNCE_MS : ms);
    };
  }

  // The steps x0..x1 (whole steps covering a plotly range; null: the whole run) of ``names``.
  function fetchRange(runId, names, range, maxPoints) {
    var q = "names=" + encodeURIComponent(names.join(",")) + "&max_points=" + maxPoints;
    if (range) {
      q += "&x0=" + Math.max(0, Math.floor(Number(range[0]))) +
           "&x1=" + Math.max(0, Math.ceil(Number(range[1])));
    }
    return fetch("/api/runs/" + runId + "/chart?" + q).then(function (r) {
      if (!r.ok) throw new Error("chart data: HTTP " + r.status);
      return r.json();
    });
  }

  // --- smoothing: TensorBoard's debiased EMA, so the first points are not pulled to 0 ---
  function emaState() { return { last: 0, num: 0, lo: Infinity, hi: -Infinity }; }

  function emaStep(state, v, w) {
    if (typeof v !== "number" || !isFinite(v)) return null;
    state.last = state.last * w + (1 - w) * v;
    state.num += 1;
    state.lo = Math.min(state.lo, v);
    state.hi = Math.max(state.hi, v);
    // An average of the values seen lies between them: clamping removes the rounding noise
    // that would otherwise draw a constant metric (loss 0.1) as a zigzag on a 1e-16 scale.
    return Math.min(state.hi, Math.max(state.lo, state.last / (1 - Math.pow(w, state.num))));
  }

  function ema(values, w) {
    var state = emaState();
    return values.map(function (v) { return emaStep(state, v, w); });
  }

  // Steps are whole: where plotly's own ticks on a step axis fall between steps (1, 1.5, 2 over
  // a run's first steps, or zoomed in), the axis ticks on every step instead, and goes back to
  // plotly's spacing once its range is wide again (WHOLE_SPAN steps). ``isSteps(el)``: whether
  // the chart's x axis holds steps now (not times or percents). Checked after every draw.
  var WHOLE_SPAN = 12;
  function wholeStepTicks(el, isSteps) {
    if (el._wholeTicks) return;
    el._wholeTicks = true;
    var check = function () {
      var axis = el._fullLayout && el._fullLayout.xaxis;
      if (!axis || !axis.range || !el.layout) return;
      var forced = !!(el.layout.xaxis && el.layout.xaxis.dtick === 1);
      var steps = isSteps(el) && axis.type === "linear";
      var span = Math.abs(axis.range[1] - axis.range[0]);
      if (steps && !forced && axis.dtick < 1) {
        Plotly.relayout(el, { "xaxis.tickmode": "linear", "xaxis.tick0": 0, "xaxis.dtick": 1 });
      } else if (forced && (!steps || span > WHOLE_SPAN)) {
        Plotly.relayout(el, { "xaxis.tickmode": "auto", "xaxis.tick0": null, "xaxis.dtick": null });
      }
    };
    el.on("plotly_afterplot", check);
    check();  // the first draw is over already
  }

  return { seriesTraces: seriesTraces, emaState: emaState, emaStep: emaStep, ema: ema, debounce: debounce, fetchRange: fetchRange,
           wholeStepTicks: wholeStepTicks, RAW_HOVER: RAW_HOVER, BAND_HOVER: BAND_HOVER };
})();
