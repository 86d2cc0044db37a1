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
  // While a confirmation is asked, live refreshes wait: they would re-render the button asked about.
  var dialog = document.getElementById("confirm-dialog");
  ["htmx:beforeRequest", "htmx:beforeOnLoad"].forEach(function (name) {
    body.addEventListener(name, function (event) {
      if (leaving || (dialog && dialog.open)) {
        event.preventDefault();
      }
    });
  });

  // A live refresh re-renders its part of the page, focused control included; the equivalent
  // control of the new content takes the focus back, so a keyboard user keeps their place.
  // Controls are matched by what they do, not by their position: id, else operation and form
  // action, else name, else link, else text.
  var CONTROLS = "a[href], button, input, select, textarea, summary, [tabindex]";
  function controlKey(el) {
    var form = el.form || null;
    var key = [
      el.tagName,
      el.id,
      el.getAttribute("data-operation") || "",
      form ? form.getAttribute("action") || "" : "",
      el.getAttribute("name") || "",
      el.getAttribute("value") || "",
      el.getAttribute("href") || "",
    ];
    if (key.slice(1).join("") === "") {
      key.push(el.textContent.trim());
    }
    return JSON.stringify(key);
  }
  var refocus = null; // {target, key} of the control focused in the part being swapped
  body.addEventListener("htmx:beforeSwap", function (event) {
    var focused = document.activeElement;
    var target = event.detail.target;
    refocus =
      focused && focused !== body && target && target.contains(focused)
        ? { target: target, key: controlKey(focused) }
        : null;
  });
  body.addEventListener("htmx:afterSwap", function (event) {
    var wanted = refocus;
    refocus = null;
    if (!wanted || wanted.target !== event.detail.target) {
      return;
    }
    var active = document.activeElement;
    if (active && active !== body && active.isConnected) {
      return; // the focus is somewhere already (htmx keeps an element with an id focused)
    }
    var scope = wanted.target.isConnected ? wanted.target : document;
    var again = Array.prototype.find.call(scope.querySelectorAll(CONTROLS), function (el) {
      return controlKey(el) === wanted.key;
    });
    if (again) {
      again.focus({ preventScroll: true });
    }
  });

  // On small screens the header's menu folds behind a "Menu" button (CSS shows it only there).
  var toggle = document.querySelector("header.top .menu-toggle");
  if (toggle) {
    toggle.closest("header").classList.add("collapsible");
    toggle.addEventListener("click", function () {
      var open = toggle.getAttribute("aria-expanded") !== "true";
      toggle.setAttribute("aria-expanded", String(open));
      document.getElementById(toggle.getAttribute("aria-controls")).classList.toggle("open", open);
    });
  }

  // A button with data-confirm asks first, in the dialog, what its data-confirm-* say; only
  // "confirm" submits its form. Without this script the button submits at once.
  if (dialog) {
    var asking = null; // the button the dialog asks about
    document.addEventListener("click", function (event) {
      var button = event.target.closest && event.target.closest("button[data-confirm]");
      if (!button || !button.form) {
        return;
      }
      event.preventDefault();
      asking = button;
      dialog.querySelector("#confirm-title").textContent = button.dataset.confirm;
      dialog.querySelector("#confirm-text").textContent = button.dataset.confirmText || "";
      dialog.querySelector("#confirm-yes").textContent = button.dataset.confirmButton || "Confirm";
      dialog.returnValue = "";
      dialog.showModal();
    });
    dialog.addEventListener("close", function () {
      var button = asking;
      asking = null;
      if (!button) {
        return;
      }
      if (dialog.returnValue === "confirm" && button.isConnected) {
        button.form.requestSubmit(button);
      } else if (button.isConnected) {
        button.focus();
      }
    });
  }
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
