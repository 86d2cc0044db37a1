// Live updates for every page (the portal and the admin dashboard): follows the server's event
// stream (/events/stream/, server-sent events built on the event feed) and tells the page.
//
//   CorralLive.follow(url, {change, refresh}) -> {close}
//   change(detail): an event the user may see (its id, kind, type, object, message).
//   refresh(): what the page shows must be read again: once the stream is first open (what
//     changed between rendering the page and opening the stream came with no event), after a
//     reconnection that had to start afresh, and on the server's "resync" signal (the events
//     since the page's last one were pruned from the feed).
//
// The browser's EventSource reconnects by itself when a response ends and resumes from the
// last event id. When the server answered with an error instead (a restart, a proxy's 502, a
// server at its limit of open pages: 503, or this user's: 429), EventSource gives up: this
// opens a new one after a growing delay drawn at random (jitter, so that the pages a restart
// or a refusal turned away do not all come back at once), resuming with ?since=.
(function () {
  "use strict";
  var MIN_DELAY_MS = 1000;
  var MAX_DELAY_MS = 30000;

  function follow(url, handlers) {
    var change = handlers.change || function () {};
    var refresh = handlers.refresh || function () {};
    var status = handlers.status || function () {};
    var source = null;
    var lastId = null;
    var delay = MIN_DELAY_MS;
    var retry = null;
    var closed = false;
    var fresh = true; // the next open starts afresh: refresh the page's figures then

    function open() {
      retry = null;
      var target = url;
      if (lastId !== null) {
        target += (url.indexOf("?") < 0 ? "?" : "&") + "since=" + encodeURIComponent(lastId);
      }
      source = new EventSource(target);
      source.addEventListener("open", function () {
        delay = MIN_DELAY_MS;
        status(true);
        if (fresh) {
          fresh = false;
          refresh();
        }
      });
      source.addEventListener("change", function (message) {
        if (message.lastEventId) {
          lastId = message.lastEventId;
        }
        var detail = {};
        try {
          detail = JSON.parse(message.data);
        } catch (error) {
          detail = {};
        }
        change(detail);
      });
      source.addEventListener("resync", function () {
        refresh();
      });
      source.addEventListener("error", function () {
        status(false);
        if (source.readyState === EventSource.CLOSED && !closed) {
          // EventSource gave up (an error status): try again later, from the last event.
          source = null;
          fresh = true;
          retry = window.setTimeout(open, delay / 2 + Math.random() * (delay / 2));
          delay = Math.min(delay * 2, MAX_DELAY_MS);
        }
      });
    }

    function close() {
      closed = true;
      if (retry !== null) {
        window.clearTimeout(retry);
      }
      if (source !== null) {
        source.close();
      }
    }

    if (!url || !window.EventSource) {
      return { close: close };
    }
    open();
    window.addEventListener("beforeunload", close);
    return { close: close };
  }

  window.CorralLive = { follow: follow };
})();
