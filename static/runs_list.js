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
