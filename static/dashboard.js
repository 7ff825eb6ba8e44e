// Renders every [data-figure] element from the JSON script it names (figure data is built
// server-side in charts.py), re-renders after HTMX swaps (live updates), follows a point's
// customdata URL on click, applies the timeline's checkpoint-level filter, keeps the
// live toggle and bulk select-all working, and ticks a running call's elapsed time.
(function () {
  "use strict";
  var LIVE_KEY = "harness-live";

  window.harnessLive = function () {
    var toggle = document.getElementById("live-toggle");
    return !toggle || toggle.checked;
  };

  function levelFilter(el) {
    var box = document.querySelector('[data-level-filter="' + el.id + '"]');
    if (!box || !el.data) return;
    var shown = {};
    box.querySelectorAll("input[type=checkbox][value]").forEach(function (input) {
      shown[input.value] = input.checked;
    });
    var indices = [], visible = [];
    el.data.forEach(function (trace, i) {
      var level = trace.meta && trace.meta.level;
      if (level && level in shown) { indices.push(i); visible.push(shown[level] ? true : false); }
    });
    if (indices.length && window.Plotly) Plotly.restyle(el, { visible: visible }, indices);
  }

  // The figure's height goes to its container, and the chart fills the container (autosize):
  // the box keeps its height whatever the window does, so a resize redraws the chart inside
  // it (Plotly's responsive handler) and never pushes it over what follows.
  function sized(el, layout) {
    var fitted = Object.assign({}, layout, { autosize: true });
    if (layout.height) el.style.height = layout.height + "px";
    delete fitted.height;
    delete fitted.width;
    return fitted;
  }

  // The figure JSON each chart was last drawn from: a swap that left it unchanged (a tab
  // switch, an out-of-band update) does not redraw the chart.
  var drawn = new WeakMap();

  function render(el) {
    var source = document.getElementById(el.dataset.figure);
    if (!source || !window.Plotly) return;
    if (drawn.get(el) === source.textContent) return;
    drawn.set(el, source.textContent);
    var figure = JSON.parse(source.textContent);
    var layout = sized(el, figure.layout);
    var config = { displaylogo: false, responsive: true };
    var first = !el.dataset.rendered;
    var done = first ? Plotly.newPlot(el, figure.data, layout, config)
                     : Plotly.react(el, figure.data, layout, config);
    el.dataset.rendered = "1";
    Promise.resolve(done).then(function () {
      levelFilter(el);
      el.dataset.ready = "1";
    });
    if (first) {
      el.on("plotly_click", function (event) {
        var point = event.points && event.points[0];
        var url = point && point.customdata;
        if (typeof url === "string" && url.charAt(0) === "/") window.location.href = url;
      });
    }
  }

  function renderAll() {
    document.querySelectorAll("[data-figure]").forEach(render);
  }

  // Plotly (1.5 MB to compile) is run only after the page's own scripts: the page is usable
  // at DOMContentLoaded and its charts are drawn when Plotly arrives (preloaded by
  // _charts_head.html, so the download overlaps the page's parsing).
  var plotlySrc = document.currentScript && document.currentScript.dataset.plotly;

  function plotlyLoad() {
    if (window.Plotly || !plotlySrc || !document.querySelector("[data-figure]")) return;
    if (document.querySelector("script[data-plotly-bundle]")) return;
    var script = document.createElement("script");
    script.src = plotlySrc;
    script.dataset.plotlyBundle = "1";
    script.addEventListener("load", renderAll);
    document.head.appendChild(script);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = document.getElementById("live-toggle");
    if (toggle) {
      toggle.checked = localStorage.getItem(LIVE_KEY) !== "off";
      toggle.addEventListener("change", function () {
        localStorage.setItem(LIVE_KEY, toggle.checked ? "on" : "off");
      });
    }
    renderAll();
    plotlyLoad();
  });
  document.addEventListener("htmx:afterSwap", plotlyLoad);
  document.addEventListener("htmx:afterSwap", renderAll);

  // A running call's elapsed time (the live output panel) counts on from the server's figure
  // between polls, which answer 304 while its output is unchanged.
  var elapsedSeen = new WeakMap();
  setInterval(function () {
    document.querySelectorAll("[data-elapsed-s]").forEach(function (el) {
      var base = parseFloat(el.dataset.elapsedS);
      if (isNaN(base)) return;
      if (!elapsedSeen.has(el)) elapsedSeen.set(el, Date.now());
      el.textContent = Math.round(base + (Date.now() - elapsedSeen.get(el)) / 1000) + " s";
    });
  }, 1000);
  // A running call's output box (polled, swapped whole) follows its tail while the operator
  // is at the bottom (or has not scrolled); scrolled up to read, they keep their position.
  // The position each stream was left at (by name), recorded as the operator scrolls: null
  // while at the bottom.
  // Held, a stream offers "jump to latest"; expanded (full height, no scrolling box) it stays
  // so across polls. Both by stream name: each poll replaces the boxes.
  var heldAt = {};
  var expanded = {};
  function showJump(stream) {
    var jump = stream.querySelector("[data-live-jump]");
    if (jump) jump.hidden = typeof heldAt[stream.dataset.name] !== "number";
  }
  function recordPosition(pre) {
    var atEnd = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 4;
    heldAt[pre.parentNode.dataset.name] = atEnd ? null : pre.scrollTop;
  }
  document.addEventListener("scroll", function (event) {
    var pre = event.target;
    if (!pre.matches || !pre.matches("[data-live-stream] pre")) return;
    recordPosition(pre);
    showJump(pre.parentNode);
  }, true);
  // The position the boxes are at when a poll replaces them wins: the scroll event that
  // records a move is dispatched with the next frame, and a swap landing before it would
  // put the box back where it was.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (!target || !target.querySelectorAll) return;
    target.querySelectorAll("[data-live-stream] pre").forEach(recordPosition);
  });
  // The boxes placed already: the settle after a swap places only those the swap did not (an
  // operator's scroll in between, not yet recorded, is not undone).
  var placed = new WeakSet();
  function followTail(root, again) {
    root.querySelectorAll("[data-live-stream]").forEach(function (stream) {
      var pre = stream.querySelector("pre");
      if (placed.has(pre) && !again) return;
      placed.add(pre);
      var open = !!expanded[stream.dataset.name];
      var toggle = stream.querySelector("[data-live-expand]");
      pre.classList.toggle("expanded", open);
      if (toggle) {
        toggle.setAttribute("aria-pressed", open ? "true" : "false");
        toggle.textContent = open ? "Scroll box" : "Full height";
      }
      if (open) heldAt[stream.dataset.name] = null;
      var held = heldAt[stream.dataset.name];
      pre.scrollTop = typeof held === "number" ? held : pre.scrollHeight;
      showJump(stream);
    });
  }
  document.addEventListener("click", function (event) {
    var stream = event.target.closest && event.target.closest("[data-live-stream]");
    if (!stream) return;
    if (event.target.closest("[data-live-jump]")) {
      heldAt[stream.dataset.name] = null;
    } else if (event.target.closest("[data-live-expand]")) {
      expanded[stream.dataset.name] = !expanded[stream.dataset.name];
    } else {
      return;
    }
    followTail(stream.parentNode, true);
  });
  // On the swap itself, not only after the settle (20 ms later): in between, the new box sat
  // at its top.
  document.addEventListener("htmx:afterSwap", function () { followTail(document); });
  document.addEventListener("htmx:afterSettle", function () { followTail(document); });
  document.addEventListener("DOMContentLoaded", function () { followTail(document); });
  document.addEventListener("change", function (event) {
    var box = event.target.closest("[data-level-filter]");
    if (box) {
      var el = document.getElementById(box.dataset.levelFilter);
      if (el) levelFilter(el);
    }
    if (event.target.matches("[data-select-all]")) {
      document.querySelectorAll('input[name=ids][form="bulk-form"]').forEach(function (cb) {
        cb.checked = event.target.checked;
      });
    }
  });
})();
