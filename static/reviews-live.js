// Live review signals on every page: polls the pending-count endpoint (a 304 while nothing
// changed) and keeps the navigation's "Reviews N" badge, the tab title's "(N)" and the
// review inbox current without a reload; announces new reviews in an aria-live region; and,
// once the user opted in with the "Notify me" button (permission is asked on that click
// only), shows a browser notification for each new review they may decide.
(function () {
  "use strict";
  var NOTIFY_KEY = "harness-review-notify";
  var VISIBLE_MS = 3000, HIDDEN_MS = 10000;
  var region, since, etag = null, version = null, timer = null;

  function notifyOn() {
    return "Notification" in window && Notification.permission === "granted" &&
      localStorage.getItem(NOTIFY_KEY) === "on";
  }

  function renderToggle() {
    var button = document.getElementById("notify-toggle");
    if (!button || !("Notification" in window)) return;
    button.hidden = false;
    if (Notification.permission === "denied") {
      button.textContent = "Notifications blocked";
      button.disabled = true;
    } else {
      button.textContent = notifyOn() ? "Notifications on" : "Notify me";
      button.setAttribute("aria-pressed", notifyOn() ? "true" : "false");
    }
  }

  function toggleNotify() {
    if (notifyOn()) {
      localStorage.setItem(NOTIFY_KEY, "off");
      renderToggle();
      return;
    }
    Promise.resolve(Notification.requestPermission()).then(function (permission) {
      localStorage.setItem(NOTIFY_KEY, permission === "granted" ? "on" : "off");
      renderToggle();
    });
  }

  function setBadge(pending) {
    var link = document.getElementById("nav-reviews");
    if (!link) return;
    var badge = link.querySelector("[data-testid=pending-count]");
    if (pending > 0) {
      if (!badge) {
        badge = document.createElement("span");
        badge.className = "badge badge-warn";
        badge.setAttribute("data-testid", "pending-count");
        link.appendChild(document.createTextNode(" "));
        link.appendChild(badge);
      }
      badge.textContent = String(pending);
    } else if (badge) {
      badge.remove();
      link.textContent = "Reviews";
    }
  }

  function setTitle(pending) {
    var bare = document.title.replace(/^\(\d+\) /, "");
    document.title = pending > 0 ? "(" + pending + ") " + bare : bare;
  }

  function describe(item) {
    return item.tool + " on task " + (item.task || item.task_id);
  }

  function announce(items) {
    if (!items.length) return;
    var noun = items.length === 1 ? "review" : "reviews";
    region.textContent = items.length + " new " + noun + " waiting: " +
      items.map(describe).join("; ");
  }

  function notify(items) {
    if (!notifyOn()) return;
    items.forEach(function (item) {
      if (!item.decidable) return;
      var n = new Notification("Review: " + item.tool, {
        body: "Task " + (item.task || item.task_id), tag: "harness-review-" + item.id,
      });
      n.onclick = function () {
        window.focus();
        window.location.href = item.url;
        n.close();
      };
    });
  }

  // The inbox list refreshes through its own HTMX request (keeping its filters and sort),
  // unless the user ticked rows: then a button offers the refresh instead.
  function ticked() {
    var boxes = "#inbox input[type=checkbox]:checked, input[type=checkbox][form=bulk-form]:checked";
    return document.querySelector(boxes) !== null;
  }

  function refreshInbox(count) {
    var inbox = document.getElementById("inbox");
    if (!inbox || !window.htmx) return;
    var offer = document.getElementById("reviews-new");
    if (!ticked()) {
      if (offer) offer.remove();
      window.htmx.trigger(inbox, "reviews-changed");
      return;
    }
    if (!offer) {
      offer = document.createElement("p");
      offer.id = "reviews-new";
      offer.className = "reviews-new";
      var button = document.createElement("button");
      button.type = "button";
      button.setAttribute("data-testid", "reviews-new");
      button.addEventListener("click", function () {
        offer.remove();
        window.htmx.trigger(document.getElementById("inbox"), "reviews-changed");
      });
      offer.appendChild(button);
      inbox.parentNode.insertBefore(offer, inbox);
    }
    offer.firstChild.textContent = count > 0
      ? count + " new review" + (count === 1 ? "" : "s") + " — refresh"
      : "Reviews changed — refresh";
  }

  var unseen = 0;

  function apply(summary) {
    // The badge and the title count what this user may decide, not every pending review.
    setBadge(summary.decidable);
    setTitle(summary.decidable);
    announce(summary.new);
    notify(summary.new);
    var changed = version !== null && version !== summary.version;
    version = summary.version;
    since = Math.max(since, summary.latest);
    if (changed) {
      unseen += summary.new.length;
      refreshInbox(unseen);
    }
  }

  function poll() {
    var headers = { Accept: "application/json" };
    if (etag) headers["If-None-Match"] = etag;
    fetch(region.dataset.url + "?since=" + since, {
      headers: headers, cache: "no-store", credentials: "same-origin",
    }).then(function (response) {
      if (response.status === 200) {
        etag = response.headers.get("ETag");
        return response.json().then(apply);
      }
      return null;
    }).catch(function () { return null; }).then(schedule);
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, document.hidden ? HIDDEN_MS : VISIBLE_MS);
  }

  document.addEventListener("DOMContentLoaded", function () {
    region = document.getElementById("reviews-live");
    if (!region) return;
    since = parseInt(region.dataset.latest, 10) || 0;
    var button = document.getElementById("notify-toggle");
    if (button) button.addEventListener("click", toggleNotify);
    renderToggle();
    poll();
  });
  // After the inbox list was swapped in, the new reviews are on screen.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail && event.detail.target && event.detail.target.id === "inbox") unseen = 0;
  });
  document.addEventListener("visibilitychange", function () { if (region) schedule(); });
})();
