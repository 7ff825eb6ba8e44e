// The review inbox and review page (loaded by their templates; no inline script, for the CSP).
// Inbox: "tick all" for bulk decisions, a count of the ticked rows, and no live refresh of the
// list while rows are ticked (a refresh would untick them). Review page: keyboard shortcuts,
// and the edit form's preview swapped in with its errors.
// A shortcut only follows a link, focuses a field or submits a form through its own submit
// button (so its confirmation and its hidden arguments_hash go with it); never while typing.
(function () {
  "use strict";

  function ticked() {
    return document.querySelectorAll("input[name=item][form=bulk-form]:checked");
  }

  function showCount() {
    var count = document.querySelector("[data-testid=bulk-count]");
    if (count) count.textContent = String(ticked().length);
  }

  document.addEventListener("change", function (event) {
    var el = event.target;
    if (el.hasAttribute && el.hasAttribute("data-bulk-all")) {
      document.querySelectorAll("input[name=item][form=bulk-form]").forEach(function (box) {
        box.checked = el.checked;
      });
    }
    if (el.name === "item" || (el.hasAttribute && el.hasAttribute("data-bulk-all"))) showCount();
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    var el = event.detail && event.detail.elt;
    if (el && el.id === "inbox" && ticked().length) event.preventDefault();
  });
  document.addEventListener("htmx:afterSwap", showCount);

  // "Preview edit" answers 422 (an argument is not valid) or 409 (decided meanwhile) with the
  // form and its errors: swap it in like a 200 (the page's htmx config swaps no 4xx).
  document.addEventListener("htmx:beforeSwap", function (event) {
    var el = event.detail && event.detail.elt;
    var status = event.detail.xhr && event.detail.xhr.status;
    if (el && el.hasAttribute("data-edit-preview") && (status === 422 || status === 409)) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  function typing(el) {
    if (!el || !el.tagName) return false;
    var tag = el.tagName.toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || el.isContentEditable;
  }

  function help(open) {
    var overlay = document.getElementById("shortcut-help");
    if (!overlay) return;
    overlay.hidden = !open;
    if (open) {
      var close = overlay.querySelector("[data-shortcut-help-close]");
      if (close) close.focus();
    }
  }

  function focusField(name) {
    var field = document.querySelector("[data-shortcut=" + name + "]");
    if (!field) return false;
    field.scrollIntoView({ block: "center" });
    field.focus();
    return true;
  }

  document.addEventListener("click", function (event) {
    var el = event.target;
    if (el.closest && el.closest("[data-shortcut-help-open]")) help(true);
    if (el.closest && el.closest("[data-shortcut-help-close]")) help(false);
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    var overlay = document.getElementById("shortcut-help");
    if (!overlay) return;  // not a review page
    if (event.key === "Escape") { help(false); return; }
    if (typing(event.target)) return;
    var handled = true;
    if (event.key === "?") {
      help(overlay.hidden);
    } else if (event.key === "j" || event.key === "k") {
      var link = document.querySelector(
        "a[data-shortcut=" + (event.key === "j" ? "next" : "previous") + "]");
      if (link) window.location.assign(link.href);
    } else if (event.key === "a") {
      var approve = document.querySelector("button[data-shortcut=approve]");
      if (approve && approve.form) approve.form.requestSubmit(approve);
    } else if (event.key === "e") {
      focusField("edit");
    } else if (event.key === "r") {
      focusField("reject");
    } else {
      handled = false;
    }
    if (handled) event.preventDefault();
  });
})();
