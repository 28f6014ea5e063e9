// Fetches /live (this page's query kept) every few seconds and swaps it in; no library, nothing from elsewhere.
(function () {
  "use strict";
  var every = 1000 * Number(document.body.getAttribute("data-refresh-s") || "5");
  var refreshes = 0;
  function refresh() {
    fetch("/live" + window.location.search, { cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var live = document.getElementById("live");
        live.innerHTML = html;
        refreshes += 1;
        live.setAttribute("data-refreshes", String(refreshes)); // how many times it was swapped in
      })
      .catch(function () { /* the monitor restarting: the next tick tries again */ })
      .then(function () { window.setTimeout(refresh, every); });
  }
  window.setTimeout(refresh, every);
})();
