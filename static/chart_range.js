// Alert links open a run page at ?steps=A-B: zoom every chart to that step range once drawn.
(function () {
  var m = /[?&]steps=(\d+)-(\d+)/.exec(window.location.search);
  if (!m) return;
  var lo = Number(m[1]), hi = Number(m[2]);
  function zoom() {
    if (typeof Plotly === "undefined") return;
    document.querySelectorAll(".chart[data-figure]").forEach(function (el) {
      if (el.layout) Plotly.relayout(el, { "xaxis.range": [lo - 0.5, hi + 0.5] });
    });
  }
  window.addEventListener("load", zoom);
})();
