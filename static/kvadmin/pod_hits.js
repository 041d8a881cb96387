// A pod's share of decisions and its hit ratio by medium over the chosen time range (uPlot,
// vendored), from #pod-hits' data-chart (kvadmin/metrics/history.py's layout).
(function () {
  const site = window.kvadmin; // behaviours.js: the theme's colours
  function percent(u, values) {
    return values.map((v) => (v == null ? "" : Math.round(v * 100) + "%"));
  }

  let chart = null;

  function draw() {
    const box = document.getElementById("pod-hits");
    if (!box || typeof uPlot === "undefined") return;
    const d = JSON.parse(box.dataset.chart);
    if (chart) chart.destroy();
    chart = null;
    if (!d.times.length || d.share.every((v) => v == null)) {
      box.textContent = "No decision chose this pod in this time range.";
      return;
    }
    chart = new uPlot(
      {
        width: box.clientWidth - 24,
        height: 220,
        scales: { y: { range: [0, 1] } },
        axes: [site.axis(), site.axis({ values: percent, size: 50 })],
        series: [
          {},
          { label: "share of decisions", stroke: site.cssVar("--muted"), width: 2, dash: [6, 4] },
          { label: "hit ratio, all media", stroke: site.cssVar("--fg"), width: 2 },
          ...d.media.map(([medium]) => ({ label: medium || "no medium", stroke: site.mediumColour(medium), width: 1.5 })),
        ],
      },
      [d.times, d.share, d.total, ...d.media.map(([, values]) => values)],
      box,
    );
    box.dataset.drawn = "true";
  }

  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("kvadmin:theme", draw);
})();
