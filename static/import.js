// The import page (templates/runs/import.html): a chosen run folder is sent without its model
// weights. A TRL output folder's checkpoints hold the model (gigabytes, past the upload limit)
// and no log needs them; `grpodeck import --url` leaves the same files out of its archive
// (clients/python/grpodeck/client/upload.py). TRL's saved arguments, training_args.bin, go.
(function () {
  "use strict";

  var WEIGHTS = /\.(safetensors|bin|pt|pth|gguf|ckpt)$/i;
  var KEPT = /(^|\/)training_args\.bin$/;

  function isWeights(file) {
    var path = file.webkitRelativePath || file.name;
    return WEIGHTS.test(path) && !KEPT.test(path);
  }

  function leaveWeightsOut(input, note) {
    var kept = new DataTransfer();
    var left = 0;
    Array.prototype.forEach.call(input.files, function (file) {
      if (isWeights(file)) { left += 1; } else { kept.items.add(file); }
    });
    if (left) { input.files = kept.files; }
    note.textContent = left ? left + " model weight file" + (left === 1 ? "" : "s") +
      " left out (no log needs them)" : "";
  }

  function init() {
    var input = document.getElementById("f-folder");
    var note = document.getElementById("folder-note");
    if (!input || !note || typeof DataTransfer === "undefined") { return; }
    input.addEventListener("change", function () { leaveWeightsOut(input, note); });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
