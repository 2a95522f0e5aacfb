// Charts on server-rendered pages.
// 1. Draw every chart that carries its figure in data-figure (on load and after htmx swaps);
//    Plotly.react keeps the user's zoom (layout.uirevision).
// 2. While a run is live, append only the new points to the drawn traces
//    (GET /api/runs/{id}/metrics?after=N): a long run is never re-sent to the browser. The
//    panel itself is re-rendered by htmx only when the charts' shape changes (new metric,
//    finding opened or resolved, status).
(function () {
  function draw(root) {
    if (typeof Plotly === "undefined") return;
    root.querySelectorAll(".chart[data-figure]").forEach(function (el) {
      var fig = JSON.parse(el.dataset.figure);
      Plotly.react(el, fig.data, fig.layout, { responsive: true, displaylogo: false });
    });
  }

  function traceNames(charts) {
    var names = [];
    charts.forEach(function (el) {
      (el.data || []).forEach(function (t) {
        if (t.meta !== "nonfinite" && names.indexOf(t.name) < 0) names.push(t.name);
      });
    });
    return names;
  }

  function append(el, series, seen) {
    // NaN/inf arrive as strings ("nan", "inf"): drawn as gaps (null) here; seen.nonfinite asks
    // for a re-render, which adds the server's NaN/inf markers and the note under the chart.
    var xs = [], ys = [], idx = [], last = -Infinity;
    (el.data || []).forEach(function (t, i) {
      var s = series[t.name];
      if (t.meta !== "nonfinite" && s && s.steps.length) {
        xs.push(s.steps);
        ys.push(s.values.map(function (v) {
          if (typeof v === "number") return v;
          seen.nonfinite = true;
          return null;
        }));
        idx.push(i);
        last = Math.max(last, s.steps[s.steps.length - 1]);
      }
    });
    if (idx.length) Plotly.extendTraces(el, { x: xs, y: ys }, idx);
    return last;
  }

  function stretchMarks(el, before, after) {
    // A finding still open at the last drawn step keeps covering the new steps.
    var update = {};
    ((el.layout && el.layout.shapes) || []).forEach(function (shape, i) {
      if (shape.x1 >= before) update["shapes[" + i + "].x1"] = after;
    });
    if (Object.keys(update).length) Plotly.relayout(el, update);
  }

  function poll() {
    var panel = document.getElementById("charts-panel");
    if (!panel || panel.dataset.live !== "1" || typeof Plotly === "undefined") return;
    var charts = panel.querySelectorAll(".chart[data-figure]");
    var names = traceNames(charts);
    if (!names.length) return;
    var before = Number(panel.dataset.after);
    var url = "/api/runs/" + panel.dataset.run + "/metrics?after=" + before +
      "&names=" + encodeURIComponent(names.join(","));
    fetch(url).then(function (r) { return r.ok ? r.json() : null; }).then(function (series) {
      if (!series || document.getElementById("charts-panel") !== panel) return;
      var last = before, seen = { nonfinite: false };
      charts.forEach(function (el) { last = Math.max(last, append(el, series, seen)); });
      if (last > before) {
        charts.forEach(function (el) { stretchMarks(el, before, last); });
        panel.dataset.after = String(last);
      }
      if (seen.nonfinite && typeof htmx !== "undefined") {
        htmx.ajax("GET", "/runs/" + panel.dataset.run + "/_charts",
                  { target: panel, swap: "outerHTML" });
      }
    }).catch(function () { /* the next poll retries */ });
  }

  function schedule() {
    var panel = document.getElementById("charts-panel");
    var seconds = panel ? Number(panel.dataset.refresh) || 2 : 2;
    setTimeout(function () { poll(); schedule(); }, seconds * 1000);
  }

  document.addEventListener("DOMContentLoaded", function () { draw(document); schedule(); });
  document.body.addEventListener("htmx:afterSettle", function (ev) {
    draw(ev.detail.elt.parentNode || document);
  });
})();
