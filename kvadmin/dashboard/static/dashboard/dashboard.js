// The dashboard: live state of its websocket, and the hit-ratio chart (uPlot, vendored).
// Tiles are swapped in by htmx's ws extension; the chart's data rides in #hit-summary's
// data-chart attribute, and the chart redraws after every frame.
(function () {
  const HEIGHT = 220;
  let chart = null;
  let drawnMedia = null;

  const { cssVar, mediumColour, axis } = window.kvadmin; // behaviours.js

  function percent(u, values) {
    return values.map((v) => (v == null ? "" : Math.round(v * 100) + "%"));
  }

  function draw() {
    const summary = document.getElementById("hit-summary");
    const box = document.getElementById("hit-chart");
    if (!summary || !summary.dataset.chart || !box || typeof uPlot === "undefined") return;
    const d = JSON.parse(summary.dataset.chart);
    const data = [d.times, d.total, ...d.media.map((m) => m[1])];
    const media = d.media.map((m) => m[0]).join(",");
    if (chart && media === drawnMedia) {
      chart.setData(data);
    } else {
      if (chart) chart.destroy();
      drawnMedia = media;
      chart = new uPlot(
        {
          width: box.clientWidth || 600,
          height: HEIGHT,
          scales: { y: { range: [0, 1] } },
          axes: [axis(), axis({ values: percent, size: 50 })],
          series: [
            {},
            { label: "all media", stroke: cssVar("--fg"), width: 2 },
            ...d.media.map((m) => ({ label: m[0] || "no medium", stroke: mediumColour(m[0]), width: 1.5 })),
          ],
        },
        data,
        box,
      );
    }
    box.dataset.minutes = String(d.total.filter((v) => v != null).length);
  }

  function live(state) {
    const root = document.getElementById("dashboard");
    if (root) root.dataset.live = state;
  }

  // The tiles are only as fresh as the last frame: when the refresh fails (the socket closed,
  // an htmx request answered an error, or no frame for three periods), the "live" line turns
  // into a visible stale marker with the time of the last good update. The next frame
  // replaces the marker with a fresh "live" line.
  const STALE_AFTER_MS = 6000;
  let lastUpdate = Date.now();

  function stale(reason) {
    const marker = document.getElementById("dashboard-updated");
    if (!marker || marker.dataset.stale) return;
    const at = new Date(Number(marker.dataset.takenAt) * 1000);
    const time = document.createElement("time");
    time.dateTime = at.toISOString();
    time.textContent = at.toLocaleTimeString([], { hour12: false });
    marker.dataset.stale = reason;
    marker.className = "stale";
    marker.setAttribute("role", "alert");
    marker.replaceChildren(`stale: ${reason}; last good update at `, time);
  }

  function updated() {
    lastUpdate = Date.now();
    draw();
  }

  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("kvadmin:theme", () => {
    if (chart) chart.destroy();
    chart = null;
    draw();
  });
  document.addEventListener("htmx:wsOpen", () => live("connected"));
  document.addEventListener("htmx:wsClose", () => {
    live("disconnected");
    stale("the connection to the server was lost");
  });
  document.addEventListener("htmx:responseError", () => stale("the refresh failed"));
  document.addEventListener("htmx:wsAfterMessage", updated);
  setInterval(() => {
    if (Date.now() - lastUpdate > STALE_AFTER_MS) stale("no update for a while");
  }, 1000);
  window.addEventListener("resize", () => {
    const box = document.getElementById("hit-chart");
    if (chart && box) chart.setSize({ width: box.clientWidth, height: HEIGHT });
  });
})();
