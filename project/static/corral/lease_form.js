// The new-lease form: "Start now" disables the start it makes pointless (the server ignores
// that start anyway, so the form works the same without this script), and a summary of
// errors takes the focus, so a screen reader reads it first and the keyboard starts there;
// its links put the cursor in the field they name.
(function () {
  "use strict";
  var now = document.getElementById("id_start_now");
  var start = document.getElementById("id_start");
  if (now && start) {
    var follow = function () {
      start.disabled = now.checked;
    };
    now.addEventListener("change", follow);
    window.addEventListener("pageshow", follow); // the browser may restore the tick on back
    follow();
  }
  var summary = document.getElementById("error-summary");
  if (summary) {
    summary.focus();
    // A link to a field in error puts the cursor in that field, not only the page at it.
    summary.addEventListener("click", function (event) {
      var link = event.target.closest("a[href^='#']");
      var field = link && document.getElementById(link.getAttribute("href").slice(1));
      if (field) {
        event.preventDefault();
        field.focus();
      }
    });
  }
})();
