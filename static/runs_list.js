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

// Summary columns: which are shown (the "Columns" checkboxes) and the sort by one of them are
// remembered in localStorage and applied again after every table refresh (htmx swaps the table,
// the choices live on #runs-area, outside it). Sorting orders the rows of the page shown.
(function () {
  var HIDDEN = "grpodeck.runs.hiddenColumns", SORT = "grpodeck.runs.sortColumn";
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

  function applySort() {
    var sort = read(SORT, null), table = document.getElementById("runs-grid");
    if (!table) return;
    table.querySelectorAll("th[data-col]").forEach(function (th) {
      if (th.hasAttribute("aria-sort")) {
        th.setAttribute("aria-sort", sort && sort.col === th.dataset.col
          ? (sort.desc ? "descending" : "ascending") : "none");
      }
    });
    if (!sort) return;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    function key(row) {
      var cell = row.querySelector("td.col-" + sort.col);
      var v = cell ? cell.dataset.value : "";
      return v === "" || v === undefined ? null : parseFloat(v);
    }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      if (x === null || isNaN(x)) return (y === null || isNaN(y)) ? 0 : 1;  // unknown last
      if (y === null || isNaN(y)) return -1;
      return sort.desc ? y - x : x - y;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }
  area.addEventListener("click", function (event) {
    var button = event.target.closest("button.sort-col");
    if (!button) return;
    var sort = read(SORT, null), col = button.dataset.col;
    write(SORT, {col: col, desc: sort && sort.col === col ? !sort.desc : true});
    applySort();
  });

  // On a phone the filter bar starts folded: the runs come first.
  var panel = document.getElementById("filter-panel");
  if (panel && window.matchMedia("(max-width: 700px)").matches) panel.open = false;

  applyColumns();
  applySort();
  document.body.addEventListener("htmx:afterSettle", applySort);
})();
