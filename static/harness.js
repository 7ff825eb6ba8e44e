// Behaviour every page shares, kept out of the markup so the Content-Security-Policy can
// forbid inline scripts and event handlers: confirmations on forms (data-confirm), selects
// that submit their form (data-autosubmit), live polling that stops while the live toggle is
// off (data-live-poll; htmx's own trigger filters would need eval), the navigation's menu
// button on narrow screens, times in the reader's zone, and announcements of live changes.
(function () {
  "use strict";

  // Narrow screens fold the navigation behind its menu button once this script runs (without
  // it the navigation stays open).
  document.documentElement.classList.add("js");

  function liveOn() {
    var toggle = document.getElementById("live-toggle");
    return !toggle || toggle.checked;
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    // A button that only asks (the review page's "Preview edit") needs no confirmation.
    if (event.submitter && event.submitter.hasAttribute("data-no-confirm")) return;
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

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".nav-toggle");
    if (!button) return;
    var open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", open ? "true" : "false");
    button.closest(".topbar").classList.toggle("nav-open", open);
  });

  // --- times --------------------------------------------------------------------------------
  // The server writes every moment as <time datetime="…Z" data-style="…">UTC text</time>
  // (harness_site/filters.py as_time). Here it becomes the user's chosen zone (<body
  // data-time-zone>, /preferences/) or the browser's, with the zone's name; the UTC moment
  // stays on hover. Parts of pages that arrive later (HTMX swaps, live updates) are converted
  // as they are added.

  function chosenZone() {
    var zone = document.body && document.body.dataset.timeZone;
    if (!zone) return undefined;
    try {
      new Intl.DateTimeFormat("en", { timeZone: zone });
      return zone;
    } catch (err) {
      return undefined;
    }
  }

  var ZONE = undefined, formatter = null;

  function parts(date) {
    var out = {};
    formatter.formatToParts(date).forEach(function (p) { out[p.type] = p.value; });
    return out;
  }

  function localText(date, style) {
    var p = parts(date);
    var day = p.year + "-" + p.month + "-" + p.day;
    var clock = p.hour + ":" + p.minute;
    var ms = ("00" + date.getUTCMilliseconds()).slice(-3);
    var text = {
      date: day,
      time: clock + ":" + p.second,
      ms: clock + ":" + p.second + "." + ms,
      seconds: day + " " + clock + ":" + p.second
    }[style] || day + " " + clock;
    return text + " " + p.timeZoneName;
  }

  function convert(el) {
    if (el.dataset.local) return;
    var date = new Date(el.getAttribute("datetime"));
    if (isNaN(date.getTime())) return;
    var style = el.dataset.style || "datetime";
    var utc = date.toISOString();
    if (style === "ago" || style === "since" || style === "until") {
      el.title = localText(date, "seconds") + " · " + utc;
    } else {
      el.textContent = localText(date, style);
      el.title = utc;
    }
    el.dataset.local = "1";
  }

  function convertWithin(root) {
    if (!formatter || !root || !root.querySelectorAll) return;
    if (root.matches && root.matches("time[datetime]")) convert(root);
    root.querySelectorAll("time[datetime]").forEach(convert);
  }

  function startTimes() {
    ZONE = chosenZone();
    formatter = new Intl.DateTimeFormat(undefined, {
      timeZone: ZONE, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
      timeZoneName: "short"
    });
    var zoneName = formatter.resolvedOptions().timeZone;
    var browserZone = new Intl.DateTimeFormat().resolvedOptions().timeZone;
    document.querySelectorAll("[data-time-zone-label]").forEach(function (el) {
      el.textContent = el.hasAttribute("data-browser-zone") ? browserZone : zoneName;
      el.title = el.textContent;  // the whole name, where the nav cuts a long one short
    });
    document.documentElement.dataset.timeZone = zoneName;
    convertWithin(document.body);
    new MutationObserver(function (records) {
      records.forEach(function (record) { record.addedNodes.forEach(convertWithin); });
    }).observe(document.body, { childList: true, subtree: true });
  }

  // --- announcements ------------------------------------------------------------------------
  // An element with data-announce="…" inside a live-updated part says its text again in the
  // page's polite live region when a swap changes it (e.g. a task's status).

  var announced = {};

  function announceWithin(root, speak) {
    if (!root || !root.querySelectorAll) return;
    var region = document.getElementById("live-announce");
    root.querySelectorAll("[data-announce]").forEach(function (el) {
      var key = el.id || el.dataset.testid || "";
      var text = el.dataset.announce;
      if (speak && region && key in announced && announced[key] !== text) region.textContent = text;
      announced[key] = text;
    });
  }

  document.addEventListener("htmx:afterSwap", function (event) {
    announceWithin(event.detail && event.detail.target && event.detail.target.isConnected
      ? event.detail.target : document.body, true);
  });

  document.addEventListener("DOMContentLoaded", function () {
    startTimes();
    announceWithin(document.body, false);
  });
})();
