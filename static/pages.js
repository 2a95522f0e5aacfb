// Forms and live regions for every page (no framework; htmx does the fetching).
(function () {
  "use strict";

  // A form that came back with errors: the first invalid field gets the focus, so a keyboard
  // or screen-reader user lands where the fix is (its message is read via aria-describedby).
  function focusFirstInvalid() {
    var bad = document.querySelector("main [aria-invalid='true']");
    if (bad) { bad.focus(); }
  }

  // The status panel is replaced on every poll, so it cannot be a live region itself: a
  // region that stays in the page announces the run's status when it changes, not each poll.
  var lastStatus = null;
  function announceStatus() {
    var status = document.getElementById("run-status");
    var region = document.getElementById("status-announcer");
    if (!status || !region) { return; }
    var now = status.textContent.trim();
    if (lastStatus !== null && now !== lastStatus) { region.textContent = "Run " + now; }
    lastStatus = now;
  }

  document.addEventListener("DOMContentLoaded", function () {
    focusFirstInvalid();
    announceStatus();
  });
  document.addEventListener("htmx:afterSwap", announceStatus);
})();
