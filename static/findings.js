// The run page's findings panel is re-rendered by htmx on every live refresh. Remember which
// finding groups (one per category) the reader opened or closed, per run, and re-apply that to
// each swapped-in panel before it is painted, so a collapsed finding stays collapsed.
// On a phone the findings after the third start folded ("N more", #more-findings), so the
// charts start in the first screen; the reader's own choice is remembered like a finding's.
(function () {
  "use strict";
  var KEY = "grpodeck.findings." + window.location.pathname;

  function load() {
    try { return JSON.parse(sessionStorage.getItem(KEY) || "{}"); } catch (e) { return {}; }
  }

  var NARROW = "(max-width: 600px)";
  var MORE = "_more";  // the key of #more-findings (categories are snake_case words)

  function apply() {
    var panel = document.getElementById("findings-panel"), saved = load();
    if (!panel) return;
    var more = document.getElementById("more-findings");
    if (more) {
      var wanted = typeof saved[MORE] === "boolean" ? saved[MORE] : !window.matchMedia(NARROW).matches;
      if (more.open !== wanted) more.open = wanted;
    }
    panel.querySelectorAll("details.finding[data-category]").forEach(function (d) {
      var open = saved[d.dataset.category];
      if (typeof open === "boolean" && d.open !== open) d.open = open;
    });
  }

  document.addEventListener("click", function (ev) {
    // Only the reader's own toggles are remembered (a click, or Enter/Space on the summary).
    var summary = ev.target.closest &&
      ev.target.closest("#findings-panel details.finding > summary, #more-findings > summary");
    if (!summary) return;
    var details = summary.parentElement;
    setTimeout(function () {
      var saved = load();
      saved[details.id === "more-findings" ? MORE : details.dataset.category] = details.open;
      try { sessionStorage.setItem(KEY, JSON.stringify(saved)); } catch (e) { /* private mode */ }
    }, 0);
  });
  document.addEventListener("DOMContentLoaded", apply);
  document.addEventListener("htmx:afterSwap", apply);
})();
