// The theme an operator chose with the header's toggle (behaviours.js), applied before the
// page paints: <html data-theme="dark|light">. Without a choice the system's
// prefers-color-scheme applies (kvadmin.css).
(function () {
  try {
    const theme = localStorage.getItem("kvadmin-theme");
    if (theme === "dark" || theme === "light") document.documentElement.dataset.theme = theme;
  } catch (error) {
    // Storage refused (private mode, policy): the system's theme applies.
  }
})();
