// The compare page's chart controls (templates/runs/compare.html, _compare_charts.html).
//
// Every chart is drawn from the server's figure (data-figure, one line per run, a min-max band
// for a summarised run) plus the reader's choices, kept here so a live refresh keeps them:
// * per chart: EMA smoothing (raw lines stay faint) and a log y axis;
// * for the page: the x axis as step, time since the run started (from the run's mean step
//   time, compare/views.py), or % of the run's planned steps; and runs hidden or shown (with
//   their checkbox, or their legend entry: a click hides the run on every chart, a double
//   click shows it alone).
// static/app.js hands the compare charts to CompareView.draw (first draw and live refresh).
//
// Smoothing, log y, the x axis and the hidden runs live in the page's URL
// (smooth=reward:0.6,kl:0.9&log=kl&x=time&hide=12, compare/view_settings.py): read from it at
// load, written back on every change, and sent with every live poll, so the refreshed
// fragment's controls are rendered with them and a reload or a shared link shows the same charts.
window.CompareView = (function () {
  "use strict";
  var state = fromUrl(location.search);  // charts: metric -> {smoothing, log}
  var AXIS_TITLES = { step: "step", time: "time since start (s, from the run's mean step time)",
                      percent: "% of the run's planned steps" };

  function fromUrl(search) {
    var params = new URLSearchParams(search), out = { x: "step", hidden: {}, charts: {} };
    function names(key) {
      return (params.getAll(key).join(",")).split(",").filter(function (n) { return n; });
    }
    names("smooth").forEach(function (item) {
      var cut = item.lastIndexOf(":"), weight = Number(item.slice(cut + 1));
      if (cut > 0 && weight > 0 && weight <= 0.99) {
        out.charts[item.slice(0, cut)] = { smoothing: weight, log: false };
      }
    });
    names("log").forEach(function (metric) {
      out.charts[metric] = out.charts[metric] || { smoothing: 0, log: false };
      out.charts[metric].log = true;
    });
    if (["time", "percent"].indexOf(params.get("x")) >= 0) out.x = params.get("x");
    names("hide").forEach(function (id) { if (/^\d+$/.test(id)) out.hidden[id] = true; });
    return out;
  }

  // The settings as query parameters (empty values are left out by put()).
  function settings() {
    var smooth = [], log = [];
    Object.keys(state.charts).forEach(function (metric) {
      var c = state.charts[metric];
      if (c.smoothing > 0) smooth.push(metric + ":" + c.smoothing);
      if (c.log) log.push(metric);
    });
    var hide = Object.keys(state.hidden).filter(function (id) { return state.hidden[id]; });
    return { smooth: smooth.join(","), log: log.join(","), x: state.x === "step" ? "" : state.x,
             hide: hide.sort(function (a, b) { return a - b; }).join(",") };
  }

  function put(params, values) {
    Object.keys(values).forEach(function (key) {
      if (values[key]) params.set(key, values[key]);
      else params.delete(key);
    });
  }

  function remember() {  // the address bar: a reload or a copied link keeps the charts
    var params = new URLSearchParams(location.search);
    put(params, settings());
    history.replaceState(history.state, "", location.pathname + "?" + params.toString());
  }

  function onPoll(ev) {  // each live poll asks for the fragment with the current settings
    if (!/^\/runs\/compare\/_live/.test(ev.detail.path || "")) return;
    var values = settings();
    Object.keys(values).forEach(function (key) {
      if (values[key]) ev.detail.parameters.set(key, values[key]);
    });
  }

  function runs() {
    var tools = document.getElementById("compare-tools");
    return tools ? JSON.parse(tools.dataset.runs) : {};
  }

  function runOf(trace) {  // a line's meta is its run id, a band's "band-<id>"
    var m = /^(?:band-)?(\d+)$/.exec(String(trace.meta));
    return m ? m[1] : null;
  }

  function legendRun(trace) {  // a legend entry's run: its line, or its smoothed line
    var m = /^(?:smoothed-)?(\d+)$/.exec(String(trace.meta));
    return m ? m[1] : null;
  }

  function showHidden() {  // the checkboxes say what the charts show
    document.querySelectorAll("input.compare-run-shown").forEach(function (box) {
      box.checked = !state.hidden[box.value];
    });
  }

  function hideRuns(change) {
    change();
    showHidden();
    remember();
    redrawAll();
    return false;  // not plotly's own toggle: that one hides a line on one chart, unremembered
  }

  // A legend entry hides its run on every chart (a double click shows it alone, or all again),
  // as the checkboxes do, and the address keeps it.
  function wireLegend(el) {
    if (el._legendWired) return;
    el._legendWired = true;
    el.on("plotly_legendclick", function (ev) {
      var id = legendRun(ev.data[ev.curveNumber]);
      if (id === null) return true;
      return hideRuns(function () { state.hidden[id] = !state.hidden[id]; });
    });
    el.on("plotly_legenddoubleclick", function (ev) {
      var id = legendRun(ev.data[ev.curveNumber]);
      if (id === null) return true;
      var others = Object.keys(runs()).filter(function (k) { return k !== id; });
      var alone = !state.hidden[id] && others.every(function (k) { return state.hidden[k]; });
      return hideRuns(function () {
        state.hidden = {};
        if (!alone) others.forEach(function (k) { state.hidden[k] = true; });
      });
    });
  }

  function chartState(metric) {
    if (!state.charts[metric]) state.charts[metric] = { smoothing: 0, log: false };
    return state.charts[metric];
  }

  // Steps as the chosen x; null where a run cannot say (no step time known).
  function xOf(steps, run) {
    if (state.x === "step" || !run) return steps.slice();
    if (state.x === "percent") return steps.map(function (s) { return 100 * s / run.max_steps; });
    if (!run.seconds_per_step) return steps.map(function () { return null; });
    return steps.map(function (s) { return s * run.seconds_per_step; });
  }

  function compose(fig, metric) {
    var info = runs(), mine = chartState(metric), data = [], smoothed = [];
    fig.data.forEach(function (t) {
      var id = runOf(t), tr = Object.assign({}, t);
      if (id === null) { data.push(tr); return; }  // the NaN/inf markers
      tr.x = xOf(t.x, info[id]);
      tr.visible = state.hidden[id] ? false : true;
      if (String(t.meta) === id && mine.smoothing > 0) {
        tr.opacity = 0.3;
        tr.showlegend = false;
        smoothed.push(Object.assign({}, tr, { y: ChartKit.ema(t.y, mine.smoothing), opacity: 1,
          showlegend: true, meta: "smoothed-" + id, uid: "smoothed-" + id, customdata: undefined,
          hovertemplate: "%{y:.4~g} (smoothed)", line: Object.assign({}, t.line, { width: 2 }) }));
      }
      data.push(tr);
    });
    var layout = Object.assign({}, fig.layout);
    layout.xaxis = Object.assign({}, fig.layout.xaxis, { title: { text: AXIS_TITLES[state.x] },
                                                         autorange: true });
    layout.yaxis = Object.assign({}, fig.layout.yaxis, { type: mine.log ? "log" : "linear" });
    layout.uirevision = state.x;  // a new x axis: zoom out to it; otherwise keep the reader's zoom
    return { data: data.concat(smoothed), layout: layout };
  }

  function draw(el, fig) {
    el._figure = fig;
    var out = compose(fig, el.dataset.metric);
    Plotly.react(el, out.data, out.layout, { responsive: true, displaylogo: false });
    ChartKit.wholeStepTicks(el, function () { return state.x === "step"; });
    wireLegend(el);
    syncTools(el.closest(".compare-box"), el.dataset.metric);
  }

  function redrawAll() {
    document.querySelectorAll("#compare-charts .chart").forEach(function (el) {
      if (el._figure) draw(el, el._figure);
    });
  }

  function syncTools(box, metric) {
    // A live refresh brings fresh controls: show the reader's choices on them.
    if (!box) return;
    var mine = chartState(metric);
    var slider = box.querySelector("input.compare-smoothing");
    var shown = box.querySelector("output");
    var log = box.querySelector("input.compare-log");
    if (slider) slider.value = String(mine.smoothing);
    if (shown) shown.value = String(mine.smoothing);
    if (log) log.checked = mine.log;
  }

  function onChartTool(ev) {
    var input = ev.target, box = input.closest && input.closest(".compare-box");
    if (!box) return;
    var el = box.querySelector(".chart"), mine = chartState(el.dataset.metric);
    if (input.classList.contains("compare-smoothing")) mine.smoothing = Number(input.value);
    else if (input.classList.contains("compare-log")) mine.log = input.checked;
    else return;
    remember();
    if (el._figure) draw(el, el._figure);
  }

  function onPageTool(ev) {
    var input = ev.target;
    if (input.id === "compare-x") state.x = input.value;
    else if (input.classList.contains("compare-run-shown")) state.hidden[input.value] = !input.checked;
    else return;
    remember();
    redrawAll();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var tools = document.getElementById("compare-tools");
    if (tools) tools.addEventListener("change", onPageTool);
    document.addEventListener("input", onChartTool);
    document.addEventListener("change", onChartTool);
    document.body.addEventListener("htmx:configRequest", onPoll);
    // A refresh whose figure did not change is not redrawn: still show the kept settings.
    document.body.addEventListener("htmx:afterSettle", function () {
      document.querySelectorAll("#compare-charts .chart").forEach(function (el) {
        syncTools(el.closest(".compare-box"), el.dataset.metric);
      });
    });
  });

  return { draw: draw };
})();
