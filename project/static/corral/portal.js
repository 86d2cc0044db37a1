// Live updates for the portal: follow the server's event stream (live.js) and tell the page.
//
// Every event the signed-in user may see fires "corral:changed" on <body>; fragments that show
// live state reload on it (hx-trigger="corral:changed from:body"), throttled by htmx. So does
// every moment the page must be read again (first connection, a resync from the server).
(function () {
  "use strict";
  var body = document.body;
  // Once the page is being left (a form posted, a link followed), a refresh that answers late
  // must neither start nor send the browser elsewhere: the user's own navigation wins.
  var leaving = false;
  document.addEventListener("submit", function () {
    leaving = true;
  });
  window.addEventListener("beforeunload", function () {
    leaving = true;
  });
  window.addEventListener("pageshow", function () {
    leaving = false; // back on this page (from the browser's back/forward cache)
  });
  ["htmx:beforeRequest", "htmx:beforeOnLoad"].forEach(function (name) {
    body.addEventListener(name, function (event) {
      if (leaving) {
        event.preventDefault();
      }
    });
  });
  var url = body.dataset.eventStream;
  if (!url || !window.CorralLive) {
    return;
  }
  function changed(detail) {
    body.dispatchEvent(new CustomEvent("corral:changed", { detail: detail }));
  }
  window.CorralLive.follow(url, {
    change: changed,
    refresh: function () {
      changed({});
    },
    status: function (live) {
      body.classList.toggle("live", live);
    },
  });
})();
