// The residency pages. /pods/ says when live updates flow (data-live on #pods-live, for
// browsers and tests); a pod's page draws its blocks per medium over time (uPlot, vendored)
// from the JSON in #chart-data.
(function () {
  function live(state) {
    const root = document.getElementById("pods-live");
    if (root) root.dataset.live = state;
  }
  document.addEventListener("htmx:wsOpen", () => live("connected"));
  document.addEventListener("htmx:wsClose", () => live("disconnected"));

  function drawPodChart() {
    const source = document.getElementById("chart-data");
    const box = document.getElementById("chart");
    if (!source || !box) return;
    const data = JSON.parse(source.textContent);
    if (!data.times.length) {
      box.textContent = "No samples yet: the periodic sampler records one every few seconds.";
      return;
    }
    const css = getComputedStyle(document.documentElement);
    const colours = { GPU: "--gpu", CPU: "--cpu", CPU_PINNED: "--cpu-pinned", DISK: "--disk" };
    const colour = (medium) =>
      css.getPropertyValue(colours[medium.trim().toUpperCase()] || "--other").trim();
    const series = data.series.map(([medium]) => ({
      label: medium || "no medium",
      stroke: colour(medium),
      width: 2,
    }));
    const options = {
      width: box.clientWidth - 24,
      height: 240,
      series: [{}, ...series],
      axes: [{}, { label: "blocks", size: 70 }],
    };
    new uPlot(options, [data.times, ...data.series.map(([, values]) => values)], box);
  }
  document.addEventListener("DOMContentLoaded", drawPodChart);

  // The pod's share of decisions and hit ratio by medium, from #pod-hits' data-chart
  // (kvadmin/dashboard/history.py's layout).
  function drawPodHits() {
    const box = document.getElementById("pod-hits");
    if (!box || typeof uPlot === "undefined") return;
    const d = JSON.parse(box.dataset.chart);
    if (!d.times.length || d.share.every((v) => v == null)) {
      box.textContent = "No decision chose or counted this pod in this time range.";
      return;
    }
    const css = getComputedStyle(document.documentElement);
    const colours = { GPU: "--gpu", CPU: "--cpu", CPU_PINNED: "--cpu-pinned", DISK: "--disk" };
    const colour = (medium) =>
      css.getPropertyValue(colours[medium.trim().toUpperCase()] || "--other").trim();
    const percent = (u, values) => values.map((v) => (v == null ? "" : Math.round(v * 100) + "%"));
    new uPlot(
      {
        width: box.clientWidth - 24,
        height: 220,
        scales: { y: { range: [0, 1] } },
        axes: [{}, { values: percent, size: 50 }],
        series: [
          {},
          { label: "share of decisions", stroke: css.getPropertyValue("--muted").trim(), width: 2, dash: [6, 4] },
          { label: "hit ratio, all media", stroke: css.getPropertyValue("--fg").trim(), width: 2 },
          ...d.media.map(([medium]) => ({ label: medium || "no medium", stroke: colour(medium), width: 1.5 })),
        ],
      },
      [d.times, d.share, d.total, ...d.media.map(([, values]) => values)],
      box,
    );
    box.dataset.drawn = "true";
  }
  document.addEventListener("DOMContentLoaded", drawPodHits);
})();
