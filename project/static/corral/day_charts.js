// A host's or a VM's charts of the last day (their admin pages, a VM's portal page): read
// again from the server every minute, when the sync has written the next point.
(function () {
  "use strict";
  var EVERY_MS = 60000;
  var boxes = document.querySelectorAll(".corral-day-box[data-refresh-url]");
  if (!boxes.length) {
    return;
  }
  function refresh(box) {
    fetch(box.dataset.refreshUrl, { credentials: "same-origin" })
      .then(function (response) {
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        if (html !== null) {
          box.innerHTML = html;
        }
      })
      .catch(function () {}); // the next minute tries again
  }
  setInterval(function () {
    if (!document.hidden) {
      boxes.forEach(refresh);
    }
  }, EVERY_MS);
})();
