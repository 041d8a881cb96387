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
    const { mediumColour, axis } = window.kvadmin; // behaviours.js
    const series = data.series.map(([medium]) => ({
      label: medium || "no medium",
      stroke: mediumColour(medium),
      width: 2,
    }));
    const options = {
      width: box.clientWidth - 24,
      height: 240,
      series: [{}, ...series],
      axes: [axis(), axis({ label: "blocks", size: 70 })],
    };
    new uPlot(options, [data.times, ...data.series.map(([, values]) => values)], box);
  }
  document.addEventListener("DOMContentLoaded", drawPodChart);
  document.addEventListener("kvadmin:theme", () => {
    document.getElementById("chart")?.replaceChildren();
    drawPodChart();
  });
})();
