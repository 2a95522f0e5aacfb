// The run page's charts (templates/runs/_charts.html): drawn once, then kept in place.
//
// A run page stays open for hours, so nothing here replaces a chart element:
// * new points are appended to the drawn traces (Plotly.extendTraces, from
//   GET /api/runs/{id}/metrics?after=N) and finding ranges stretched with Plotly.relayout;
// * when a finding opens, resolves or changes severity, the server sends only the marks
//   (data-marks-only) and they replace each chart's shapes with Plotly.relayout;
// * when the charts' shape changes (new metric, status), the server's fragment (data-poll; 204
//   until then) is merged chart by chart with Plotly.react: uirevision keeps what the user
//   did, a new chart is inserted, nothing is swapped.
// Reading aids live here too, remembered in localStorage: an EMA smoothing slider (raw points
// stay faint), markers only up to MARKERS_UP_TO points, one x-range for every chart (a toggle),
// and a log scale for the charts that offer one (KL, gradient norm).
(function () {
  "use strict";
  var PREFS_KEY = "grpodeck.charts";
  var MARKERS_UP_TO = 50;
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var CONFIG = { responsive: true, displaylogo: false };
  var prefs = loadPrefs();
  var shared = { range: stepsFromUrl() };  // the linked x-range; null: autorange

  function loadPrefs() {
    var d = { smoothing: 0.6, linkX: true, log: {} };
    try { return Object.assign(d, JSON.parse(localStorage.getItem(PREFS_KEY) || "{}")); }
    catch (e) { return d; }
  }

  function savePrefs() {
    try { localStorage.setItem(PREFS_KEY, JSON.stringify(prefs)); } catch (e) { /* private mode */ }
  }

  function stepsFromUrl() {
    // Alert links open a run page at ?steps=A-B: every chart starts zoomed to that range.
    var m = /[?&]steps=(\d+)-(\d+)/.exec(window.location.search);
    return m ? [Number(m[1]) - 0.5, Number(m[2]) + 0.5] : null;
  }

  // A logged series as the server sent it: no meta. The NaN/inf markers ("nonfinite"), our
  // smoothed lines ("smoothed") and any other helper trace carry one and are left alone.
  function isRaw(t) { return t.meta === undefined || t.meta === null; }

  // The metric a trace draws: its legendgroup. Its name is the legend text, HTML-escaped by the
  // server (plotly renders markup in names), so a metric called "a<b" is not its name.
  function metricOf(t) { return t.legendgroup || t.name; }

  // A summary's min-max band ("band" traces, static/chartkit.js), in its line's colour.
  function isBand(t) { return t.meta === "band"; }

  function tint(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  function panelCharts() {
    var panel = document.getElementById("charts-panel");
    return panel ? Array.prototype.slice.call(panel.querySelectorAll(".chart")) : [];
  }

  // System charts read by the clock (app/charts/wall_clock.py: layout.meta.time_axis): their x
  // is a time, so they keep their own zoom, out of the step-linked range and its refetch.
  var TIME = "system/time";
  function onClock(el) { return !!(el._base && el._base.meta && el._base.meta.time_axis); }
  // Metrics a clock chart draws from the samples kept at their own times (layout.meta.samples,
  // app/metrics/samples.py): their new points come by time, GET /api/runs/{id}/system-samples,
  // since the samples of an evaluation all carry one step.
  function sampledNames(el) { return (el._base && el._base.meta && el._base.meta.samples) || []; }
  function sampled(el) { return sampledNames(el).length > 0; }
  function stepCharts() { return panelCharts().filter(function (el) { return !onClock(el); }); }

  // --- work on many charts: the ones in view now, the others when idle or scrolled to ---
  // Eleven charts redrawn at once take most of a second; the reader sees two to four.
  var later = new Map();  // chart -> {kind: its latest pending update of that kind}
  var seen = typeof IntersectionObserver === "undefined" ? null :
    new IntersectionObserver(function (entries) {
      entries.forEach(function (e) { if (e.isIntersecting) flush(e.target); });
    });

  function inView(el) {
    var r = el.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight && r.width > 0;
  }

  function flush(el) {
    var jobs = later.get(el);
    if (!jobs) return;
    later.delete(el);
    if (seen) seen.unobserve(el);
    Object.keys(jobs).forEach(function (kind) { jobs[kind](); });
  }

  function idle(fn) {
    if (window.requestIdleCallback) window.requestIdleCallback(fn, { timeout: 500 });
    else setTimeout(fn, 30);
  }

  function drainLater() {
    var next = later.keys().next();
    if (next.done) return;
    flush(next.value);
    if (later.size) idle(drainLater);
  }

  // ``job`` for each chart: at once for those in view, one chart per idle moment for the rest
  // (a chart's latest job of a ``kind`` replaces one of that kind still waiting).
  function eachChart(kind, charts, job) {
    var waiting = later.size;
    charts.forEach(function (el) {
      var run = function () { job(el); };
      if (inView(el)) { flush(el); run(); return; }
      if (!later.has(el)) later.set(el, {});
      later.get(el)[kind] = run;
      if (seen) seen.observe(el);
    });
    if (!waiting && later.size) idle(drainLater);
  }

  // --- smoothing: static/chartkit.js (debiased EMA) ---
  var emaStep = ChartKit.emaStep, emaState = ChartKit.emaState;

  function smoothedTrace(raw, color, state, w) {
    return { type: "scatter", x: raw.x.slice(), name: raw.name, meta: "smoothed",
             text: raw.text && raw.text.slice(),  // a clock chart's steps: extended with x
             y: raw.y.map(function (v) { return emaStep(state, v, w); }),
             yaxis: raw.yaxis, mode: "lines", legendgroup: metricOf(raw), line: { color: color, width: 2 },
             hovertemplate: "%{y:.4~g} (smoothed)" };
  }

  // --- the figure as drawn: the server's figure plus the reader's choices ---
  function compose(el, fig) {
    var w = prefs.smoothing, data = [], raws = [], key = el.id.replace(/^chart-/, "");
    fig.data.filter(function (t) { return t.meta !== "smoothed"; }).forEach(function (t) {
      var tr = Object.assign({}, t);
      if (isBand(t)) {  // drawn before its line: the colour the line is about to get
        tr.fillcolor = tint(COLORS[raws.length % COLORS.length], 0.18);
      } else if (isRaw(t)) {
        var color = COLORS[raws.length % COLORS.length];
        var n = t.x.length;
        Object.assign(tr, { line: Object.assign({}, t.line, { color: color }),
                            marker: Object.assign({}, t.marker, { color: color }),
                            mode: n > MARKERS_UP_TO ? "lines" : "lines+markers",
                            legendgroup: metricOf(t), opacity: w > 0 ? 0.3 : 1, showlegend: !(w > 0),
                            hovertemplate: t.hovertemplate || ChartKit.RAW_HOVER });
        raws.push({ index: data.length, color: color });
      }
      data.push(tr);
    });
    el._smoothOf = []; el._ema = [];
    if (w > 0) {
      raws.forEach(function (r) {
        var state = emaState();
        data.push(smoothedTrace(data[r.index], r.color, state, w));
        el._smoothOf.push(r.index); el._ema.push(state);
      });
    }
    var layout = Object.assign({}, fig.layout);
    layout.xaxis = Object.assign({}, fig.layout.xaxis);
    layout.yaxis = Object.assign({}, fig.layout.yaxis, { type: prefs.log[key] ? "log" : "linear" });
    var range = prefs.linkX && !onClock(el) ? shared.range : el._xrange;
    if (range) { layout.xaxis.range = range.slice(); layout.xaxis.autorange = false; }
    return { data: data, layout: layout };
  }

  function render(el, fig) {
    el._base = fig.layout;
    var out = compose(el, fig);
    Plotly.react(el, out.data, out.layout, CONFIG);
    wire(el);
  }

  // Memory charts (layout.meta.byte_ticks): plotly's tick formats are decimal ("1.5G"), so the
  // ticks are written here in binary units for the range shown ("1.5 GiB"), again after every
  // draw that moves the range (new points, zoom).
  var BYTE_UNITS = [["GiB", 1073741824], ["MiB", 1048576], ["KiB", 1024], ["B", 1]];
  function byteTicks(lo, hi) {
    var top = Math.max(Math.abs(lo), Math.abs(hi));
    var unit = BYTE_UNITS.filter(function (u) { return top >= u[1] || u[1] === 1; })[0];
    var span = (hi - lo) / unit[1] || 1;
    var raw = span / 5, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; })
      .filter(function (s) { return s >= raw; })[0];
    var vals = [], text = [];
    for (var v = Math.ceil(lo / unit[1] / step) * step; v <= hi / unit[1] + 1e-9; v += step) {
      vals.push(v * unit[1]);
      text.push(+v.toFixed(3) + " " + unit[0]);
    }
    return { vals: vals, text: text };
  }
  function wireByteTicks(el) {
    if (el._byteTicks) return;
    el._byteTicks = true;
    var update = function () {
      var axis = el._fullLayout && el._fullLayout.yaxis;
      if (!axis || !axis.range || !(el.layout.meta && el.layout.meta.byte_ticks)) return;
      var ticks = byteTicks(axis.range[0], axis.range[1]);
      if (String(ticks.text) === String(el.layout.yaxis.ticktext)) return;  // settled
      Plotly.relayout(el, { "yaxis.tickmode": "array", "yaxis.tickvals": ticks.vals,
                            "yaxis.ticktext": ticks.text });
    };
    el.on("plotly_afterplot", update);
    update();  // the first draw is over already
  }

  function redraw(el) {
    if (el._base && el.data) render(el, { data: el.data, layout: el._base });
  }

  function drawNew(root) {
    root.querySelectorAll(".chart[data-figure]").forEach(function (el) {
      var fig = JSON.parse(el.dataset.figure);
      el.removeAttribute("data-figure");  // the drawn traces are the data from now on
      var clock = fig.layout.meta && fig.layout.meta.time_axis;
      if (!prefs.linkX && shared.range && !clock) el._xrange = shared.range;
      render(el, fig);
    });
    root.querySelectorAll("input.chart-log").forEach(function (box) {
      box.checked = !!prefs.log[box.dataset.chart];
    });
  }

  // --- one x-range for every chart ---
  function xRangeOf(ev) {
    if ("xaxis.range[0]" in ev) return [ev["xaxis.range[0]"], ev["xaxis.range[1]"]];
    if (ev["xaxis.range"]) return ev["xaxis.range"].slice();
    if (ev["xaxis.autorange"]) return null;
    return undefined;  // not an x-range change (shapes, y zoom)
  }

  function sameRange(a, b) {
    return a === b || (!!a && !!b && a[0] === b[0] && a[1] === b[1]);
  }

  // --- zoom: the visible steps fetched again, at the finest resolution that fits ---
  var zoomSeq = 0;

  // Only a chart that draws summaries (a band) or a part of the run has finer or other points
  // to fetch: one that draws every raw point already keeps them.
  function coarseOrPartial(el) { return el.data && (el._partial || el.data.some(isBand)); }

  function refetch(charts, range) {
    var panel = document.getElementById("charts-panel");
    var drawn = charts.filter(coarseOrPartial);
    var names = traceNames(drawn);
    if (!panel || !names.length) return;
    var seq = ++zoomSeq;
    ChartKit.fetchRange(panel.dataset.run, names, range, Number(panel.dataset.maxPoints) || 2000)
      .then(function (reply) {
        if (seq !== zoomSeq) return;  // a newer zoom is on its way
        eachChart("data", drawn, function (el) {
          if (!el.data) return;
          el._partial = !!range;  // the fetched steps only
          redrawSeries(el, reply.series);
        });
      })
      .catch(function () { /* the drawn points stay; the next zoom fetches again */ });
  }

  function redrawSeries(el, series) {
    var data = [];
    el.data.forEach(function (t) {
      if (t.meta === "smoothed" || isBand(t)) return;  // rebuilt from the new lines
      var s = isRaw(t) && series[metricOf(t)];
      if (s) ChartKit.seriesTraces(t, s).forEach(function (u) { data.push(u); });
      else data.push(t);
    });
    render(el, { data: data, layout: el._base });
  }

  // The charts of a burst of relayouts (a drag, a merge of several charts), fetched once.
  var zoomQueue = new Set(), zoomRange = null;
  var fetchQueued = ChartKit.debounce(function () {
    var charts = Array.from(zoomQueue);
    zoomQueue.clear();
    refetch(charts, zoomRange);
  });

  function refetchSoon(charts, range) {
    charts.forEach(function (el) { zoomQueue.add(el); });
    zoomRange = range;
    fetchQueued();
  }

  function wire(el) {
    if (el.layout && el.layout.meta && el.layout.meta.byte_ticks) wireByteTicks(el);
    ChartKit.wholeStepTicks(el, function (c) { return !onClock(c); });
    if (el._wired) return;
    el._wired = true;
    el.on("plotly_relayout", function (ev) {
      var range = xRangeOf(ev);
      if (range === undefined) return;
      el._xrange = range;
      if (onClock(el)) return;  // its own time range: every point is drawn already
      if (!prefs.linkX) { refetchSoon([el], range); return; }
      if (sameRange(range, shared.range)) return;  // an echo of our own sync
      refetchSoon(stepCharts(), range);
      shared.range = range;
      var others = stepCharts().filter(function (other) { return other !== el && other.layout; });
      others.forEach(function (other) { other._xrange = range; });
      eachChart("zoom", others, function (other) {
        Plotly.relayout(other, range ? { "xaxis.range": range.slice() } : { "xaxis.autorange": true });
      });
    });
  }

  // --- live: append points, stretch open findings, merge shape changes ---
  function traceNames(charts) {
    var names = [];
    charts.forEach(function (el) {
      var bySample = sampledNames(el);
      (el.data || []).forEach(function (t) {
        var m = metricOf(t);
        if (isRaw(t) && names.indexOf(m) < 0 && bySample.indexOf(m) < 0) names.push(m);
      });
      if (onClock(el) && names.indexOf(TIME) < 0) names.push(TIME);
    });
    return names;
  }

  // New points of a clock chart: each step at its sample's time (ms), a step without a stamp
  // left out (the server's next figure places it between its neighbours).
  function onTheClock(s, stamps) {
    var at = {}, out = { steps: [], values: [], x: [], text: [] };
    if (stamps) stamps.steps.forEach(function (st, i) {
      if (typeof stamps.values[i] === "number") at[st] = stamps.values[i] * 1000;
    });
    s.steps.forEach(function (st, i) {
      if (!(st in at)) return;
      out.steps.push(st); out.values.push(s.values[i]); out.x.push(at[st]); out.text.push("step " + st);
    });
    return out;
  }

  function append(el, series, seen) {
    // NaN/inf arrive as strings ("nan", "inf"): drawn as gaps (null) here; seen.nonfinite asks
    // for the server's figure, which adds the NaN/inf markers and the note under the chart.
    var xs = [], ys = [], idx = [], last = -Infinity, total = 0, base = el.data.length - el._smoothOf.length;
    var clock = onClock(el), texts = [];
    el.data.forEach(function (t, i) {
      var s = series[metricOf(t)];
      if (!isRaw(t) || !s || !s.steps.length) return;
      if (clock) last = Math.max(last, s.steps[s.steps.length - 1]);
      if (clock && !s.x) s = onTheClock(s, series[TIME]);
      if (!s.steps.length) return;
      var y = s.values.map(function (v) {
        if (typeof v === "number") return v;
        seen.nonfinite = true;
        return null;
      });
      var x = clock ? s.x : s.steps;
      xs.push(x); ys.push(y); idx.push(i); texts.push(clock ? s.text : null);
      var j = el._smoothOf.indexOf(i);
      if (j >= 0) {
        xs.push(x.slice()); idx.push(base + j); texts.push(clock ? s.text.slice() : null);
        ys.push(y.map(function (v) { return emaStep(el._ema[j], v, prefs.smoothing); }));
      }
      last = Math.max(last, s.steps[s.steps.length - 1]);
      total = Math.max(total, t.x.length + s.steps.length);
    });
    if (idx.length) Plotly.extendTraces(el, clock ? { x: xs, y: ys, text: texts } : { x: xs, y: ys }, idx);
    if (total > MARKERS_UP_TO) hideMarkers(el);
    return last;
  }

  function hideMarkers(el) {
    var marked = [];
    el.data.forEach(function (t, i) { if (isRaw(t) && t.mode !== "lines") marked.push(i); });
    if (marked.length) Plotly.restyle(el, { mode: "lines" }, marked);
  }

  function stretchMarks(el, before, after) {
    // A finding still open at the last drawn step keeps covering the new steps.
    var update = {};
    ((el.layout && el.layout.shapes) || []).forEach(function (shape, i) {
      if (shape.x1 >= before) {
        update["shapes[" + i + "].x1"] = after;
        if (el._base.shapes && el._base.shapes[i]) el._base.shapes[i].x1 = after;
      }
    });
    if (Object.keys(update).length) Plotly.relayout(el, update);
  }

  function pollPoints(panel) {
    var charts = panelCharts().filter(function (el) { return el.data; });
    var names = traceNames(charts);
    if (!names.length) return Promise.resolve();
    var before = Number(panel.dataset.after);
    var url = "/api/runs/" + panel.dataset.run + "/metrics?after=" + before +
      "&names=" + encodeURIComponent(names.join(","));
    return fetch(url).then(function (r) { return r.ok ? r.json() : null; }).then(function (series) {
      if (!series || document.getElementById("charts-panel") !== panel) return;
      var last = before, seen = { nonfinite: false };
      charts.forEach(function (el) { last = Math.max(last, append(el, series, seen)); });
      if (last > before) {
        charts.filter(function (el) { return !onClock(el); })
          .forEach(function (el) { stretchMarks(el, before, last); });
        panel.dataset.after = String(last);
      }
      if (seen.nonfinite) return refresh(panel, true);
    });
  }

  function pollSamples(panel) {
    // The sampled clock charts' new samples, each at its own time (x) with its step (text).
    var charts = panelCharts().filter(function (el) { return el.data && sampled(el); });
    if (!charts.length) return Promise.resolve();
    var url = "/api/runs/" + panel.dataset.run + "/system-samples?after_ms=" +
      (Number(panel.dataset.afterMs) || 0);
    return fetch(url).then(function (r) { return r.ok ? r.json() : null; }).then(function (got) {
      if (!got || document.getElementById("charts-panel") !== panel) return;
      var seen = { nonfinite: false };
      charts.forEach(function (el) { append(el, got.series, seen); });
      panel.dataset.afterMs = String(got.last_ms);
    });
  }

  function refresh(panel, force) {
    // The server's fragment when the charts' shape changed (always when forced), merged in.
    var url = force ? panel.dataset.poll.replace(/\?.*$/, "") : panel.dataset.poll;
    return fetch(url).then(function (r) { return r.status === 200 ? r.text() : null; })
      .then(function (html) {
        if (!html) return false;
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("charts-panel");
        if (fresh && fresh.dataset.marksOnly === "1") { remark(panel, fresh); return false; }
        if (fresh) merge(panel, fresh);
        return !!fresh;
      });
  }

  function remark(panel, fresh) {
    // Only the findings changed (templates/runs/_chart_marks.html): each step chart's marks are
    // replaced, its data and zoom stay; the points are polled as usual.
    ["live", "refresh", "poll"].forEach(function (k) { panel.dataset[k] = fresh.dataset[k]; });
    var marks = JSON.parse(fresh.dataset.marks || "{}");
    panelCharts().forEach(function (el) {
      if (!el.data || !el._base || onClock(el)) return;
      var m = marks[el.id.replace(/^chart-/, "")] || { shapes: [], annotations: [] };
      el._base.shapes = m.shapes;
      el._base.annotations = m.annotations;
      Plotly.relayout(el, { shapes: m.shapes, annotations: m.annotations });
    });
  }

  function merge(panel, fresh) {
    ["after", "afterMs", "live", "refresh", "poll"].forEach(function (k) { panel.dataset[k] = fresh.dataset[k]; });
    var boxes = {};
    panel.querySelectorAll(".chart-box").forEach(function (b) { boxes[b.dataset.key] = b; });
    var prev = panel.querySelector("#chart-tools");
    var freshBoxes = fresh.querySelectorAll(".chart-box");
    prev.hidden = !freshBoxes.length;
    freshBoxes.forEach(function (box) {
      var mine = boxes[box.dataset.key];
      delete boxes[box.dataset.key];
      if (mine) {
        updateBox(mine, box);
      } else {
        mine = document.importNode(box, true);
        prev.after(mine);
        drawNew(mine);
      }
      prev = mine;
    });
    Object.keys(boxes).forEach(function (k) { Plotly.purge(boxes[k].querySelector(".chart")); boxes[k].remove(); });
    placeHeadings(panel, fresh);
    var empty = panel.querySelector("p.empty"), freshEmpty = fresh.querySelector("p.empty");
    if (empty && !freshEmpty) empty.remove();
    if (freshEmpty) {
      if (empty) empty.textContent = freshEmpty.textContent;
      else panel.appendChild(document.importNode(freshEmpty, true));
    }
  }

  function placeHeadings(panel, fresh) {
    // A group's heading (h2.chart-group) sits right above its first chart (data-before).
    var keep = {};
    fresh.querySelectorAll("h2.chart-group").forEach(function (h) {
      var box = panel.querySelector('.chart-box[data-key="' + h.dataset.before + '"]');
      if (!box) return;
      var mine = document.getElementById(h.id) || document.importNode(h, true);
      mine.textContent = h.textContent;
      mine.dataset.before = h.dataset.before;
      box.before(mine);
      keep[h.id] = true;
    });
    panel.querySelectorAll("h2.chart-group").forEach(function (h) { if (!keep[h.id]) h.remove(); });
  }

  function updateBox(mine, box) {
    // The same elements, new content: title, the NaN/inf note, and the figure (Plotly.react).
    mine.querySelector(".chart-title").textContent = box.querySelector(".chart-title").textContent;
    var note = mine.querySelector(".nonfinite-note"), freshNote = box.querySelector(".nonfinite-note");
    if (note && !freshNote) note.remove();
    if (freshNote) {
      if (note) note.textContent = freshNote.textContent;
      else mine.appendChild(document.importNode(freshNote, true));
    }
    var el = mine.querySelector(".chart");
    render(el, JSON.parse(box.querySelector(".chart").dataset.figure));
    el._partial = false;  // the server's figure covers the whole run: zoomed, fetch the range again
    var range = prefs.linkX ? shared.range : el._xrange;
    if (range && !onClock(el)) refetchSoon([el], range);
  }

  function schedule(panel) {
    setTimeout(function () {
      if (document.getElementById("charts-panel") !== panel || panel.dataset.live !== "1") return;
      refresh(panel, false)
        .then(function (merged) {
          if (!merged) return pollPoints(panel).then(function () { return pollSamples(panel); });
        })
        .catch(function () { /* the next poll retries */ })
        .then(function () { schedule(panel); });
    }, (Number(panel.dataset.refresh) || 2) * 1000);
  }

  // --- the toolbar ---
  function wireTools(panel) {
    var slider = document.getElementById("chart-smoothing");
    var shown = document.getElementById("chart-smoothing-value");
    var link = document.getElementById("chart-link-x");
    var pending = false;
    slider.value = String(prefs.smoothing);
    shown.value = String(prefs.smoothing);
    link.checked = !!prefs.linkX;
    slider.addEventListener("input", function () {
      prefs.smoothing = Number(slider.value);
      shown.value = slider.value;
      savePrefs();
      if (pending) return;
      pending = true;
      requestAnimationFrame(function () { pending = false; eachChart("smoothing", panelCharts(), redraw); });
    });
    link.addEventListener("change", function () {
      prefs.linkX = link.checked;
      savePrefs();
      if (prefs.linkX) {  // all charts follow the one zoomed last, or show every step
        shared.range = null;
        panelCharts().forEach(function (el) { el._xrange = null; redraw(el); Plotly.relayout(el, { "xaxis.autorange": true }); });
      }
    });
    panel.addEventListener("change", function (ev) {
      var box = ev.target;
      if (!box.classList || !box.classList.contains("chart-log")) return;
      prefs.log[box.dataset.chart] = box.checked;
      savePrefs();
      var el = document.getElementById("chart-" + box.dataset.chart);
      if (el && el.layout) Plotly.relayout(el, { "yaxis.type": box.checked ? "log" : "linear", "yaxis.autorange": true });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var panel = document.getElementById("charts-panel");
    if (!panel || typeof Plotly === "undefined") return;
    wireTools(panel);
    drawNew(panel);
    // A link's ?steps=A-B (a finding's "charts at steps A-B") is fetched as a zoom to it is:
    // the stored points of those steps, not the whole run's summaries cut to the range.
    if (shared.range) refetch(stepCharts(), shared.range);
    if (panel.dataset.live === "1") schedule(panel);
  });
})();
