// A host's charts of the last day (its admin page): read again from the server every minute,
// when the sync has written the host's next point.
(function () {
  "use strict";
  var EVERY_MS = 60000;
  var box = document.getElementById("host-day-charts");
  if (!box || !box.dataset.refreshUrl) {
    return;
  }
  function refresh() {
    if (document.hidden) {
      return;
    }
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
  setInterval(refresh, EVERY_MS);
})();
