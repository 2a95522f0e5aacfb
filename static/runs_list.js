// The runs list answers a refused change (403, 409, 422) with the table and the reason in it;
// htmx leaves 4xx responses unswapped by default, so let this one table take them.
document.body.addEventListener("htmx:beforeSwap", function (event) {
  var target = event.detail.target;
  if (target && target.id === "runs-table" && event.detail.xhr.status >= 400 &&
      event.detail.xhr.status < 500) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});

// While runs are live the table re-renders every few seconds; skip a refresh while the user is
// in the middle of something it would wipe (runs ticked for compare, a tags/note editor open,
// focus inside the table).
document.body.addEventListener("htmx:beforeRequest", function (event) {
  var elt = event.detail.elt;
  if (!elt || elt.id !== "runs-table") return;
  var busy = elt.querySelector("input[name=ids]:checked, details[open]") ||
             elt.contains(document.activeElement);
  if (busy) event.preventDefault();
});

// Summary columns: which are shown (the "Columns" checkboxes) are remembered in localStorage and
// applied again after every table refresh (htmx swaps the table, the choices live on #runs-area,
// outside it).
(function () {
  var HIDDEN = "grpodeck.runs.hiddenColumns";
  var area = document.getElementById("runs-area");
  var menu = document.getElementById("columns-menu");
  if (!area || !menu) return;

  function read(key, fallback) {
    try { var v = localStorage.getItem(key); return v === null ? fallback : JSON.parse(v); }
    catch (e) { return fallback; }
  }
  function write(key, value) {
    try { localStorage.setItem(key, JSON.stringify(value)); } catch (e) { /* private mode */ }
  }
  var defaults = (area.dataset.defaultHidden || "").split(" ").filter(Boolean);

  function applyColumns() {
    var hidden = read(HIDDEN, defaults);
    menu.querySelectorAll("input[name=col]").forEach(function (box) {
      box.checked = hidden.indexOf(box.value) < 0;
      area.classList.toggle("hide-" + box.value, !box.checked);
    });
  }
  menu.addEventListener("change", function () {
    var hidden = [];
    menu.querySelectorAll("input[name=col]").forEach(function (box) {
      if (!box.checked) hidden.push(box.value);
    });
    write(HIDDEN, hidden);
    applyColumns();
  });

  // Sorting is the server's (header links, listing/sorting.py): after a header's swap, the
  // filter form's sort and order show the table's, so the next filter keeps that sort.
  function syncSort() {
    var table = document.getElementById("runs-table"), form = document.getElementById("run-filters");
    if (!table || !form || !table.dataset.sort) return;
    form.elements.sort.value = table.dataset.sort;
    form.elements.dir.value = table.dataset.dir;
  }

  // On a phone the filter bar starts folded: the runs come first.
  var panel = document.getElementById("filter-panel");
  if (panel && window.matchMedia("(max-width: 700px)").matches) panel.open = false;

  applyColumns();
  document.body.addEventListener("htmx:afterSettle", syncSort);
})();

// "Compare selected" with too few or too many runs ticked: say so next to the button instead of
// opening the compare page's 400 (the bounds come from compare/views.py via data-min/max).
(function () {
  var form = document.getElementById("compare-form");
  if (!form) return;
  form.addEventListener("submit", function (event) {
    var ticked = document.querySelectorAll('input[name=ids][form=compare-form]:checked').length;
    var low = Number(form.dataset.min), high = Number(form.dataset.max);
    var message = document.getElementById("compare-message");
    if (ticked >= low && ticked <= high) {
      if (message) message.textContent = "";
      return;
    }
    event.preventDefault();
    if (!message) return;
    message.textContent = ticked < low
      ? "Tick " + low + " to " + high + " runs to compare (" + ticked + " ticked)."
      : "At most " + high + " runs can be compared: " + ticked + " are ticked.";
  });
})();
