// The charts of the last day (a host's, a cluster's or a VM's admin page, the dashboard, a VM's
// portal page): each box marked data-day-charts is read again from the server every minute,
// when the next point has been written.
(function () {
  "use strict";
  var EVERY_MS = 60000;
  var boxes = Array.prototype.filter.call(
    document.querySelectorAll("[data-day-charts]"),
    function (box) { return box.dataset.refreshUrl; }
  );
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
