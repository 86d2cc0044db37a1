// Keeps the admin dashboard current: it follows the event feed (live.js) and fetches the
// figures again shortly after each change, and every 15 seconds in any case.
(function () {
  "use strict";
  const block = document.getElementById("corral-dashboard");
  if (!block) {
    return;
  }
  const url = block.dataset.refreshUrl;
  let timer = null;
  async function refresh() {
    timer = null;
    try {
      const response = await fetch(url, {credentials: "same-origin", cache: "no-store"});
      if (response.ok && !response.redirected) {
        block.innerHTML = await response.text();
        block.dataset.refreshedAt = new Date().toISOString();
      }
    } catch (error) {
      // Offline for a moment: keep the last figures and try again.
    }
  }
  function soon(delay) {
    if (timer === null) {
      timer = window.setTimeout(refresh, delay);
    }
  }
  if (window.CorralLive && block.dataset.eventStream) {
    window.CorralLive.follow(block.dataset.eventStream, {
      change: function () { soon(300); },
      refresh: function () { soon(0); },
    });
  }
  window.setInterval(function () { soon(0); }, 15000);
})();
