// Charts on server-rendered pages other than the run page (which has static/charts.js): draw
// every chart that carries its figure in data-figure, on load and after htmx swaps.
(function () {
  function draw(root) {
    if (typeof Plotly === "undefined") return;
    root.querySelectorAll(".chart[data-figure]").forEach(function (el) {
      if (el.closest("#charts-panel")) return;  // the run page draws and keeps its own
      var fig = JSON.parse(el.dataset.figure);
      Plotly.react(el, fig.data, fig.layout, { responsive: true, displaylogo: false });
    });
  }

  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.body.addEventListener("htmx:afterSettle", function (ev) {
    draw(ev.detail.elt.parentNode || document);
  });
})();
