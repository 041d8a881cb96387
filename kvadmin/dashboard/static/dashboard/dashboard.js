// The dashboard: live state of its websocket, and the hit-ratio chart (uPlot, vendored).
// Tiles are swapped in by htmx's ws extension; the chart's data rides in #hit-summary's
// data-chart attribute, and the chart redraws after every frame. Whether the tiles are fresh
// is static/kvadmin/console.js's job (the #dashboard-updated marker).
(function () {
  const HEIGHT = 220;
  let chart = null;
  let drawnMedia = null;

  const { cssVar, mediumColour, axis } = window.kvadmin; // behaviours.js

  function percent(u, values) {
    return values.map((v) => (v == null ? "" : Math.round(v * 100) + "%"));
  }

  function draw() {
    const summary =
      document.getElementById("hit-summary") || document.getElementById("hit-summary-range");
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

  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("kvadmin:theme", () => {
    if (chart) chart.destroy();
    chart = null;
    draw();
  });
  document.addEventListener("htmx:wsOpen", () => live("connected"));
  document.addEventListener("htmx:wsClose", () => live("disconnected"));
  document.addEventListener("htmx:wsAfterMessage", draw);
  document.addEventListener("htmx:afterSwap", draw);
  window.addEventListener("resize", () => {
    const box = document.getElementById("hit-chart");
    if (chart && box) chart.setSize({ width: box.clientWidth, height: HEIGHT });
  });
})();
