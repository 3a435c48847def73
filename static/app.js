// Leasehold dashboard behaviour, loaded from /static (the CSP allows no
// inline script). Everything here is progressive: pages work without it.
(function () {
  "use strict";

  // The server's clock, so that relative times and countdowns do not
  // depend on the browser's clock being right.
  function serverOffset() {
    var now = document.querySelector("meta[name=server-now]");
    if (!now) return 0;
    var t = Date.parse(now.content);
    return isNaN(t) ? 0 : t - Date.now();
  }
  var offset = 0;

  function ago(ms) {
    var s = Math.round(ms / 1000), future = s < 0;
    s = Math.abs(s);
    var out;
    if (s < 5) return future ? "in a moment" : "just now";
    if (s < 60) out = s + " s";
    else if (s < 3600) out = Math.floor(s / 60) + " min";
    else if (s < 86400) out = Math.floor(s / 3600) + " h";
    else out = Math.floor(s / 86400) + " d";
    return future ? "in " + out : out + " ago";
  }

  // <time datetime="…" data-relative> shows "3 min ago"; the exact time
  // stays in its title.
  function relative(root) {
    root.querySelectorAll("time[data-relative]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("datetime"));
      if (isNaN(t)) return;
      if (!el.title) el.title = el.textContent;
      el.textContent = ago(Date.now() + offset - t);
    });
  }

  // <span data-countdown="deadline"> counts down to a lease deadline.
  function countdowns(root) {
    root.querySelectorAll("[data-countdown]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("data-countdown"));
      if (isNaN(t)) return;
      var left = t - (Date.now() + offset);
      el.textContent = left > 0 ? (left / 1000).toFixed(1) + " s left" : "expired " + ago(-left).replace(" ago", "") + " ago";
      el.classList.toggle("expired", left <= 0);
    });
  }

  // A checkbox with data-select-all checks every box named by its value.
  function selectAll(ev) {
    var box = ev.target;
    if (!box.matches || !box.matches("input[data-select-all]")) return;
    document.querySelectorAll("input[name='" + box.getAttribute("data-select-all") + "']").forEach(function (b) {
      b.checked = box.checked;
    });
  }

  function tick() { relative(document); countdowns(document); }

  document.addEventListener("DOMContentLoaded", function () {
    offset = serverOffset();
    tick();
    setInterval(tick, 500);
    document.addEventListener("change", selectAll);
    // htmx swaps new content in: bring its times to life at once.
    document.body.addEventListener("htmx:afterSwap", function (ev) {
      offset = serverOffset();
      relative(ev.target);
      countdowns(ev.target);
    });
  });
})();

// Job detail: a polled region swapped in with hx-select leaves this
// page's <meta name=server-now> behind, and countdowns would be measured
// against the time the page first loaded. Take the server's time from the
// answer (htmx drops its <head>) before the swap, so that the afterSwap
// handler above recomputes the offset from it.
(function () {
  "use strict";
  var serverNow = /<meta name="server-now" content="([^"]+)"/;
  document.addEventListener("htmx:beforeSwap", function (ev) {
    var m = serverNow.exec(ev.detail.serverResponse || "");
    var meta = document.querySelector("meta[name=server-now]");
    if (m && meta) meta.setAttribute("content", m[1]);
  });
})();

// Replay: ← and → step the attempt's viewer by following its Previous and
// Next links (htmx swaps the viewer in place and puts the step in the
// address bar; without htmx the link loads the page at that step). The
// viewer stepped is the one last used, else the one the URL chose, else
// the newest attempt's. The live job page polls its own address, so that
// a chosen step survives the refresh.
(function () {
  "use strict";
  var active = null; // the attempt number of the viewer last used

  function viewer() {
    var v = active && document.querySelector("[data-testid=replay][data-attempt='" + active + "']");
    return v || document.querySelector("[data-testid=replay][data-selected]") || document.querySelector("[data-testid=replay]");
  }

  document.addEventListener("click", function (ev) {
    var v = ev.target.closest && ev.target.closest("[data-testid=replay]");
    if (v) active = v.getAttribute("data-attempt");
  });

  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "ArrowLeft" && ev.key !== "ArrowRight") return;
    if (ev.altKey || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.defaultPrevented) return;
    var t = ev.target;
    if (t && t.closest && t.closest("input, textarea, select, [contenteditable]")) return;
    var v = viewer();
    if (!v) return;
    var link = v.querySelector("a[data-replay=" + (ev.key === "ArrowLeft" ? "prev" : "next") + "]");
    if (!link) return;
    ev.preventDefault();
    active = v.getAttribute("data-attempt");
    // htmx binds a swapped-in link only when the swap settles, 20 ms later;
    // a key pressed (or held) inside that window would follow the bare href
    // and reload the whole page. Binding it now is harmless twice over.
    if (window.htmx) window.htmx.process(link);
    link.click();
  });

  document.addEventListener("htmx:configRequest", function (ev) {
    var elt = ev.detail.elt;
    if (elt && elt.id === "job-live" && location.pathname === ev.detail.path) {
      ev.detail.path = location.pathname + location.search;
    }
  });
})();

// Live updates: a live part refreshes when the page's event stream
// (GET /events, through htmx's sse extension on <main>) names one of its
// events (hx-trigger="sse:jobs, sse:reset"). A browser without
// EventSource polls instead, at the interval in data-poll; so does a page
// whose stream the server refused (429: this session has too many open;
// 503: the server has), until a stream opens again (the extension keeps
// trying): the parts polling then go back to the stream alone with their
// next refresh. This runs before htmx first processes the page (deferred
// scripts run before DOMContentLoaded), and again on each part a refresh
// brings in.
(function () {
  "use strict";
  var noSource = !window.EventSource;
  var polling = noSource;
  function poll(root, processed) {
    if (!polling || !root || !root.querySelectorAll) return;
    var els = Array.prototype.slice.call(root.querySelectorAll("[data-poll], [sse-connect]"));
    if (root.matches && root.matches("[data-poll], [sse-connect]")) els.push(root);
    els.forEach(function (el) {
      if (noSource && el.hasAttribute("sse-connect")) {
        el.removeAttribute("sse-connect");
        el.removeAttribute("hx-ext");
      }
      if (el.hasAttribute("data-poll")) {
        var every = el.getAttribute("data-poll"), events = el.getAttribute("hx-trigger");
        el.setAttribute("hx-trigger", noSource || !events ? every : events + ", " + every);
        el.removeAttribute("data-poll");
        if (processed && window.htmx) window.htmx.process(el); // set up again with the new trigger
      }
    });
  }
  poll(document);
  document.addEventListener("htmx:beforeProcessNode", function (ev) { poll(ev.target); });
  if (noSource) return;
  // An answer other than a stream (a refusal, a sign-in page) closes the
  // EventSource for good; a dropped connection only makes it reconnect.
  document.addEventListener("htmx:sseError", function (ev) {
    var source = ev.detail && ev.detail.source;
    if (polling || !source || source.readyState !== EventSource.CLOSED) return;
    polling = true;
    document.documentElement.setAttribute("data-live", "polling");
    poll(document, true);
  });
  document.addEventListener("htmx:sseOpen", function () {
    polling = false;
    document.documentElement.setAttribute("data-live", "stream");
  });
})();

// The menu at phone size: the header's Menu button opens and closes the
// navigation (CSS shows the button only on narrow screens, and shows the
// navigation itself when scripts are off). Escape closes it again.
(function () {
  "use strict";
  var toggle = document.querySelector("[aria-controls=main-nav]");
  if (!toggle) return;
  function set(open) { toggle.setAttribute("aria-expanded", open ? "true" : "false"); }
  toggle.addEventListener("click", function () { set(toggle.getAttribute("aria-expanded") !== "true"); });
  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "Escape" || toggle.getAttribute("aria-expanded") !== "true") return;
    set(false);
    toggle.focus();
  });
})();

// A table wider than its box scrolls in it (.table-wrap): such a box
// takes the keyboard's focus, so that the arrow keys scroll it, and is
// named for screen readers. Checked again after every swap and resize.
(function () {
  "use strict";
  function mark() {
    document.querySelectorAll(".table-wrap").forEach(function (w) {
      var scrolls = w.scrollWidth > w.clientWidth;
      if (scrolls && !w.hasAttribute("tabindex")) {
        w.setAttribute("tabindex", "0");
        w.setAttribute("role", "region");
        w.setAttribute("aria-label", "Table, scrolls sideways");
        w.setAttribute("data-scrolls", "");
      } else if (!scrolls && w.hasAttribute("data-scrolls")) {
        ["tabindex", "role", "aria-label", "data-scrolls"].forEach(function (a) { w.removeAttribute(a); });
      }
    });
  }
  document.addEventListener("DOMContentLoaded", mark);
  document.addEventListener("htmx:afterSettle", mark);
  window.addEventListener("resize", mark);
})();
