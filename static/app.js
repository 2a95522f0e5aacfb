// Draw every chart that carries its figure in data-figure; called on load and after htmx swaps.
// Plotly.react keeps the user's zoom across live refreshes (layout.uirevision).
(function () {
  function draw(root) {
    if (typeof Plotly === "undefined") return;
    root.querySelectorAll(".chart[data-figure]").forEach(function (el) {
      var fig = JSON.parse(el.dataset.figure);
      Plotly.react(el, fig.data, fig.layout, { responsive: true, displaylogo: false });
      el.dataset.drawn = String(fig.data.reduce(function (n, t) { return n + (t.x ? t.x.length : 0); }, 0));
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.body.addEventListener("htmx:afterSettle", function (ev) { draw(ev.detail.elt.parentNode || document); });
})();
