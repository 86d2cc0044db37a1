// The charts of the last day, week or month (a host's, a cluster's or a VM's admin page, the
// dashboard, a VM's portal page): each box marked data-day-charts is read again from the server
// every minute, when the next point has been written. Its picker (data-span-picker, links that
// work without this script too) swaps it for another span in place, and the minutely reads then
// keep to that span.
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
  // Shows what ``url`` answers in the box, unless another span was picked meanwhile; false
  // when the server would not draw it.
  function read(box, url) {
    return fetch(url, { credentials: "same-origin" })
      .then(function (response) {
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        if (html !== null && box.dataset.refreshUrl === url) {
          box.innerHTML = html;
        }
        return html !== null;
      });
  }
  function pick(picker, box, link) {
    box.dataset.refreshUrl = link.dataset.chartsUrl;
    read(box, link.dataset.chartsUrl)
      .then(function (drawn) {
        if (!drawn) {
          window.location.assign(link.href);
          return;
        }
        Array.prototype.forEach.call(picker.querySelectorAll("a"), function (other) {
          if (other === link) {
            other.setAttribute("aria-current", "true");
          } else {
            other.removeAttribute("aria-current");
          }
        });
        history.replaceState(history.state, "", link.href);
      })
      .catch(function () {
        window.location.assign(link.href); // the page itself draws the span
      });
  }
  Array.prototype.forEach.call(document.querySelectorAll("[data-span-picker]"), function (picker) {
    var box = document.getElementById(picker.dataset.spanPicker);
    if (!box) {
      return;
    }
    picker.addEventListener("click", function (event) {
      var link = event.target.closest("a[data-charts-url]");
      if (!link || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey ||
          event.altKey) {
        return; // a new tab or window opens the page itself
      }
      event.preventDefault();
      pick(picker, box, link);
    });
  });
  setInterval(function () {
    if (!document.hidden) {
      boxes.forEach(function (box) {
        read(box, box.dataset.refreshUrl).catch(function () {}); // the next minute tries again
      });
    }
  }, EVERY_MS);
})();
