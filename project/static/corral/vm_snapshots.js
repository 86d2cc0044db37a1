// A VM's snapshot form (templates/portal/_vm_snapshots.html): only a running VM's memory can be
// saved, so "Save its memory too" follows the VM's status as the page's live panel shows it
// (hosts.snapshots.WITH_MEMORY_FROM); the server refuses it all the same for a VM that stopped.
(function () {
  "use strict";
  var RUNNING = ["up", "paused"];
  var box = document.querySelector("#snapshot-form input[type=checkbox]");
  var running = document.getElementById("snapshot-memory-running");
  var stopped = document.getElementById("snapshot-memory-stopped");
  if (!box || !running || !stopped) {
    return;
  }
  function follow() {
    var status = document.getElementById("vm-status");
    if (!status) {
      return;
    }
    var runs = RUNNING.indexOf(status.getAttribute("data-status")) >= 0;
    box.disabled = !runs;
    if (!runs) {
      box.checked = false;
    }
    running.hidden = !runs;
    stopped.hidden = runs;
  }
  document.body.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "vm-panel") {
      follow();
    }
  });
})();
