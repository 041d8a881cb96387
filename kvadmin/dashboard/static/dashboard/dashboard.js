// The dashboard: live state of its websocket, and the hit-ratio chart (uPlot, vendored).
// Tiles are swapped in by htmx's ws extension; the chart's data rides in #hit-summary's
// data-chart attribute, and the chart redraws after every frame. Dragging across the chart
// zooms in (uPlot's own), double-click zooms out; a redraw keeps a zoom the operator chose
// (the x range shown rides in #hit-chart's data-x-min/-max). Whether the tiles are fresh is
// static/kvadmin/console.js's job (the #dashboard-updated marker).
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
      const x = chart.scales.x;
      const times = chart.data[0];
      const zoomed = times.length > 0 && (x.min > times[0] || x.max < times[times.length - 1]);
      chart.setData(data, !zoomed);
    } else {
      if (chart) chart.destroy();
      drawnMedia = media;
      chart = new uPlot(
        {
          width: box.clientWidth || 600,
          height: HEIGHT,
          scales: { y: { range: [0, 1] } },
          axes: [axis(), axis({ values: percent, size: 50 })],
          hooks: {
            setScale: [
              (u, key) => {
                if (key !== "x") return;
                box.dataset.xMin = String(u.scales.x.min);
                box.dataset.xMax = String(u.scales.x.max);
              },
            ],
          },
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
