// Behaviour every page shares, kept out of the markup so the Content-Security-Policy can
// forbid inline scripts and event handlers: confirmations on forms (data-confirm), selects
// that submit their form (data-autosubmit), and live polling that stops while the live
// toggle is off (data-live-poll; htmx's own trigger filters would need eval).
(function () {
  "use strict";

  function liveOn() {
    var toggle = document.getElementById("live-toggle");
    return !toggle || toggle.checked;
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  document.addEventListener("change", function (event) {
    var el = event.target;
    if (el.hasAttribute && el.hasAttribute("data-autosubmit") && el.form) el.form.submit();
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    var el = event.detail && event.detail.elt;
    if (el && el.hasAttribute("data-live-poll") && !liveOn()) event.preventDefault();
  });
})();
