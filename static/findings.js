// The run page's findings panel is re-rendered by htmx on every live refresh. Remember which
// finding groups (one per category) the reader opened or closed, per run, and re-apply that to
// each swapped-in panel before it is painted, so a collapsed finding stays collapsed.
(function () {
  "use strict";
  var KEY = "grpodeck.findings." + window.location.pathname;

  function load() {
    try { return JSON.parse(sessionStorage.getItem(KEY) || "{}"); } catch (e) { return {}; }
  }

  function apply() {
    var panel = document.getElementById("findings-panel"), saved = load();
    if (!panel) return;
    panel.querySelectorAll("details.finding[data-category]").forEach(function (d) {
      var open = saved[d.dataset.category];
      if (typeof open === "boolean" && d.open !== open) d.open = open;
    });
  }

  document.addEventListener("click", function (ev) {
    // Only the reader's own toggles are remembered (a click, or Enter/Space on the summary).
    var summary = ev.target.closest && ev.target.closest("#findings-panel details.finding > summary");
    if (!summary) return;
    var details = summary.parentElement;
    setTimeout(function () {
      var saved = load();
      saved[details.dataset.category] = details.open;
      try { sessionStorage.setItem(KEY, JSON.stringify(saved)); } catch (e) { /* private mode */ }
    }, 0);
  });
  document.addEventListener("DOMContentLoaded", apply);
  document.addEventListener("htmx:afterSwap", apply);
})();
