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
