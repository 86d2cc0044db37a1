// Names the parts of the admin's select2 pickers for assistive technology, which select2 4.0
// leaves unnamed: the box by its field's label, the search box by what it searches, and
// what the open box controls. Grouped results get a list structure screen readers accept:
// select2 puts a plain <ul> between each group and its options.
(function ($) {
  "use strict";
  function labelOf(select) {
    var label = select.id && document.querySelector('label[for="' + select.id + '"]');
    return label ? label.textContent.replace(/:\s*$/, "").trim() : "";
  }
  function name(select) {
    var box = select.nextElementSibling;
    var shown = box && box.querySelector(".select2-selection__rendered");
    if (shown && labelOf(select)) {
      shown.setAttribute("aria-label", labelOf(select));
    }
  }
  $(function () {
    document.querySelectorAll("select.admin-autocomplete").forEach(name);
  });
  $(document).on("select2:open", "select.admin-autocomplete", function () {
    var select = this;
    var box = select.nextElementSibling;
    var combobox = box && box.querySelector(".select2-selection[role=combobox]");
    if (combobox && combobox.getAttribute("aria-owns")) {
      combobox.setAttribute("aria-controls", combobox.getAttribute("aria-owns"));
    }
    var search = document.querySelector(".select2-container--open .select2-search__field");
    if (search) {
      search.setAttribute("aria-label", "Search " + (labelOf(select) || "the choices"));
    }
  });
  new MutationObserver(function () {
    document
      .querySelectorAll(".select2-results__options--nested:not([role])")
      .forEach(function (list) {
        list.setAttribute("role", "none");
      });
  }).observe(document.documentElement, { childList: true, subtree: true });
})(django.jQuery);
