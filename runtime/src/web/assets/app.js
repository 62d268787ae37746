// jobworker web: optional enhancements. Every page works without this
// file; it adds live updates (server-sent events) and bulk selection.
"use strict";

(function () {
  // Bulk selection: a checkbox with data-select-all checks every id box of
  // its form.
  document.addEventListener("change", function (e) {
    var box = e.target;
    if (!box.matches || !box.matches("input[data-select-all]")) return;
    var form = box.closest("form");
    if (!form) return;
    form.querySelectorAll("input[name=ids]").forEach(function (b) { b.checked = box.checked; });
  });

  // Live updates: the page names its stream in <body data-live>; on each
  // event the parts marked data-live-part are fetched again (at most once
  // a second) and events are listed in #live-events when the page has it.
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource) return;
  var pending = false;
  function refresh() {
    pending = false;
    fetch(location.href, { headers: { "X-Live": "1" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) return;
        var doc = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live-part]").forEach(function (el) {
          var name = el.getAttribute("data-live-part");
          var fresh = doc.querySelector('[data-live-part="' + name + '"]');
          if (fresh) el.replaceWith(document.importNode(fresh, true));
        });
      })
      .catch(function () {});
  }
  // A stream holds one of the browser's few connections to this host
  // (six over HTTP/1.1): only a visible page keeps one open, and a page
  // left behind closes its own.
  var source = null;
  var status = document.getElementById("live-status");
  function open() {
    if (source) return;
    source = new EventSource(url);
    source.onopen = function () { if (status) status.textContent = "live"; };
    source.onerror = function () { if (status) status.textContent = "reconnecting…"; };
    source.onmessage = received;
    // The app's own word on its board subscription (lost, then back).
    source.addEventListener("status", function (m) { if (status) status.textContent = m.data; });
  }
  function close() {
    if (source) source.close();
    source = null;
    if (status) status.textContent = "paused";
  }
  function received(m) {
    var list = document.getElementById("live-events");
    if (list) {
      var item = document.createElement("li");
      item.textContent = m.data;
      list.insertBefore(item, list.firstChild);
      while (list.children.length > 50) list.removeChild(list.lastChild);
    }
    if (!pending) {
      pending = true;
      setTimeout(refresh, 1000);
    }
  }
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") close(); else open();
  });
  window.addEventListener("pagehide", close);
  window.addEventListener("pageshow", function () { if (document.visibilityState !== "hidden") open(); });
  if (document.visibilityState !== "hidden") open();
})();
