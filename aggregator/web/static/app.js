// Plumb's page: keep <main> live by re-fetching its server-rendered fragment.
// No framework and no build step; without JavaScript the page is the same, just not live.
"use strict";

(function () {
  const main = document.getElementById("content");
  const live = document.getElementById("live");
  if (!main || !main.dataset.fragment) return;
  const every = Number(main.dataset.refreshMs) || 2000;
  let failures = 0;

  function mark(state, text) {
    live.dataset.state = state;
    live.textContent = text;
  }

  async function refresh() {
    try {
      const resp = await fetch(main.dataset.fragment, { cache: "no-store" });
      if (resp.status === 401) {
        // The sign-in expired or was dropped: sign in again, then come back here.
        window.location.assign("/login?next=" + encodeURIComponent(window.location.pathname));
        return;
      }
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      main.innerHTML = await resp.text();
      failures = 0;
      document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
      mark("live", "live · updated " + new Date().toLocaleTimeString());
    } catch (err) {
      failures += 1;
      mark("offline", "aggregator unreachable (" + err.message + "), retrying");
    } finally {
      // Back off while the aggregator is away, up to 8 intervals.
      setTimeout(refresh, every * Math.min(2 ** failures, 8));
    }
  }

  refresh();
})();
