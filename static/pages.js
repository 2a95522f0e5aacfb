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

  // The inspector's search box asks as you type; its "change" on blur would ask again and
  // replace the groups under the click that blurred it (e.g. opening a long completion).
  function quietSearchChange() {
    var box = document.getElementById("f-q");
    if (box) { box.addEventListener("change", function (e) { e.stopPropagation(); }); }
  }

  // The new-run form: choosing a preset fills the form at once (no second button; the button
  // stays for browsers without JS), and a reward row's weight appears when a reward is chosen.
  function presetOnChoice() {
    var picker = document.getElementById("f-preset");
    if (!picker) { return; }
    picker.addEventListener("change", function () {
      if (picker.value) { picker.form.submit(); }
    });
  }
  function weightsFollowRewards() {
    document.querySelectorAll("select[id^='f-reward_'][id$='_name']").forEach(function (sel) {
      var weight = document.getElementById(sel.id.replace(/_name$/, "_weight"));
      if (!weight) { return; }
      sel.addEventListener("change", function () {
        if (sel.value && !weight.value) { weight.value = "1.0"; }
        if (!sel.value) { weight.value = ""; }
        weight.placeholder = sel.value ? "1.0" : "";
      });
    });
  }

  // Elapsed timers (<time class="ticking" data-since="ISO">) count every second between the
  // server's refreshes; a refreshed panel brings new ones, found again at each tick.
  function words(seconds) {
    seconds = Math.max(0, Math.round(seconds));
    var h = Math.floor(seconds / 3600), m = Math.floor(seconds % 3600 / 60), s = seconds % 60;
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    return h ? h + "h " + pad(m) + "m" : (m ? m + "m " + pad(s) + "s" : s + "s");
  }
  function tick() {
    document.querySelectorAll("time.ticking[data-since]").forEach(function (el) {
      var since = Date.parse(el.dataset.since);
      if (!isNaN(since)) { el.textContent = words((Date.now() - since) / 1000); }
    });
  }
  setInterval(tick, 1000);
  document.addEventListener("htmx:afterSwap", tick);  // a swapped-in timer shows its time at once

  // The Logs tab shows the end of the output, like `tail -f`.
  function logToEnd() {
    var pre = document.getElementById("log-text");
    if (pre) { pre.scrollTop = pre.scrollHeight; }
  }
  document.addEventListener("htmx:afterSettle", logToEnd);
  document.addEventListener("DOMContentLoaded", logToEnd);

  document.addEventListener("DOMContentLoaded", function () {
    tick();
    presetOnChoice();
    weightsFollowRewards();
    focusFirstInvalid();
    quietSearchChange();
    announceStatus();
  });
  document.addEventListener("htmx:afterSwap", announceStatus);

  // Every action confirms: a server answer that carries `HX-Trigger: {"toast": "..."}` shows
  // its words in a toast (a live region, so it is read out too) for a few seconds.
  var toastTimer = null;
  document.body.addEventListener("toast", function (event) {
    var box = document.getElementById("toast");
    var words = event.detail && (event.detail.value || event.detail.message);
    if (!box || !words) { return; }
    box.textContent = words;
    box.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(function () { box.hidden = true; }, 6000);
  });
})();
