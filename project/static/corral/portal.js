// Live updates for the portal: follow the server's event stream and tell the page.
//
// Every event the signed-in user may see arrives on /events/stream/ (server-sent events built on
// the event feed). Each one fires "corral:changed" on <body>; fragments that show live state
// reload on it (hx-trigger="corral:changed from:body"), throttled by htmx. The browser's
// EventSource reconnects by itself and resumes from the last event id.
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
  if (!url || !window.EventSource) {
    return;
  }
  var source = new EventSource(url);
  source.addEventListener("change", function (message) {
    var detail = {};
    try {
      detail = JSON.parse(message.data);
    } catch (error) {
      detail = {};
    }
    body.dispatchEvent(new CustomEvent("corral:changed", { detail: detail }));
  });
  var connected = false;
  source.addEventListener("open", function () {
    body.classList.add("live");
    if (!connected) {
      // What changed between rendering the page and opening the stream came with no event:
      // refresh once now. Reconnections resume from the last event id and miss nothing.
      connected = true;
      body.dispatchEvent(new CustomEvent("corral:changed", { detail: {} }));
    }
  });
  source.addEventListener("error", function () {
    body.classList.remove("live");
  });
  window.addEventListener("beforeunload", function () {
    source.close();
  });
})();
