// Charts on server-rendered pages other than the run page (which has static/charts.js): draw
// every chart that carries its figure in data-figure, on load and after htmx swaps.
//
// A polled fragment that re-renders charts (the compare page while a run is live) brings new
// chart elements; each is put back into the element it replaces (same box and data-metric), which
// plotly then redraws with the new figure: with the layout's constant `uirevision` plotly keeps
// what the reader did to it (zoom, pan, legend entries hidden), and nothing on the page moves.
(function () {
  var CHARTS = ".chart[data-figure]";
  var kept = {};  // drawn charts of a box being swapped, by box id and metric

  function key(el) {
    var box = el.parentNode;
    return box && box.id && el.dataset.metric ? box.id + "\u0000" + el.dataset.metric : null;
  }

  function keep(ev) {
    var target = ev.detail.target;
    if (!target || !target.querySelectorAll) return;
    target.querySelectorAll(CHARTS).forEach(function (el) {
      var k = key(el);
      if (k && el._fullLayout && !el.closest("#charts-panel")) kept[k] = el;  // drawn here
    });
  }

  function putBack() {
    Object.keys(kept).forEach(function (k) {
      var old = kept[k];
      if (old.isConnected) return;
      document.querySelectorAll(CHARTS).forEach(function (el) {
        if (el === old || key(el) !== k) return;
        old.dataset.figure = el.dataset.figure;
        old.className = el.className;
        el.replaceWith(old);
      });
    });
    kept = {};
  }

  function draw(root) {
    if (typeof Plotly === "undefined") return;
    root.querySelectorAll(CHARTS).forEach(function (el) {
      if (el.closest("#charts-panel")) return;  // the run page draws and keeps its own
      if (el._drawn === el.dataset.figure) return;  // already shows this figure
      el._drawn = el.dataset.figure;
      var fig = JSON.parse(el.dataset.figure);
      if (window.CompareView && el.closest("#compare-charts")) return CompareView.draw(el, fig);  // static/compare.js
      Plotly.react(el, fig.data, fig.layout, { responsive: true, displaylogo: false });
    });
  }

  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.body.addEventListener("htmx:beforeSwap", keep);
  document.body.addEventListener("htmx:oobBeforeSwap", keep);
  document.body.addEventListener("htmx:afterSwap", putBack);
  document.body.addEventListener("htmx:afterSettle", function (ev) {
    draw(ev.detail.elt.parentNode || document);
  });
})();

// Keyboard users: plotly's toolbar buttons are links a mouse or a tap uses on hover; in the tab
// order they would be ~8 stops per chart between the reader and the rest of the page. Every
// toolbar plotly draws (on any page, whenever) is taken out of the tab order.
(function () {
  function untab(node) {
    if (node.nodeType !== 1) return;
    if (node.matches(".modebar-btn")) node.setAttribute("tabindex", "-1");
    node.querySelectorAll(".modebar-btn").forEach(function (b) { b.setAttribute("tabindex", "-1"); });
  }
  new MutationObserver(function (records) {
    records.forEach(function (r) { r.addedNodes.forEach(untab); });
  }).observe(document.body, { childList: true, subtree: true });
})();

// The launch form: a reward row's parameters belong to the function it names. Picking another
// function drops the parameters that one does not take (each option lists its own in
// data-params), so the default row's "target=20" does not follow a switch to unit_tests and come
// back as "unknown parameter(s)"; what the new function takes, and anything not key=value (the
// server says why), stays as typed.
(function () {
  document.addEventListener("change", function (ev) {
    var select = ev.target;
    if (!select.matches || !select.matches('.reward-row select[name$="_name"]')) return;
    var input = select.closest(".reward-row").querySelector('input[name$="_params"]');
    if (!input) return;
    var option = select.options[select.selectedIndex];
    var takes = (option && option.dataset.params ? option.dataset.params.split(",") : []);
    input.value = input.value.split(/[,;]/).map(function (part) { return part.trim(); })
      .filter(function (part) {
        var eq = part.indexOf("=");
        return part && (eq < 1 || takes.indexOf(part.slice(0, eq).trim()) >= 0);
      }).join(", ");
  });
})();
