// Behaviours the templates ask for with data attributes, instead of inline event handlers
// (which the Content-Security-Policy refuses).
// - <select data-submit-on-change>, <input data-submit-on-change>: submits its form when the
//   choice changes (a checkbox when it is ticked or cleared);
// - <button data-copy="id">: copies the text of element #id to the clipboard;
// - <button data-remove-row-after-request>: after its htmx request, removes its table row;
// - <section data-reveal-on-swap>: once htmx swaps it in (a review after Enter in a field),
//   scrolled to the top of the window and its first field focused (the invalid one if any),
//   or itself: the answer is where the operator looks and where the keyboard goes next.
// - every table that scrolls sideways is a tab stop (keyboard scrolling on a phone).
// And the header's two buttons: the theme toggle (kept in localStorage, read by theme.js) and,
// on narrow screens, the menu that folds the navigation.
// window.kvadmin has what the page scripts share: a medium's colour and the charts' axes.
(function () {
  document.addEventListener("change", (event) => {
    const control = event.target.closest("[data-submit-on-change]");
    if (control && control.form) control.form.requestSubmit();
  });
  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-copy]");
    const source = button && document.getElementById(button.dataset.copy);
    if (source) navigator.clipboard.writeText(source.textContent);
  });
  document.addEventListener("htmx:afterRequest", (event) => {
    const button = event.detail.elt;
    if (button && button.matches("[data-remove-row-after-request]")) button.closest("tr")?.remove();
  });
  document.addEventListener("htmx:afterSettle", (event) => {
    const swapped = event.detail.elt;
    if (!(swapped instanceof Element)) return;
    const shown = swapped.matches("[data-reveal-on-swap]")
      ? swapped
      : swapped.querySelector("[data-reveal-on-swap]");
    if (!shown) return;
    shown.scrollIntoView({ block: "start" });
    const field =
      shown.querySelector("[aria-invalid=true]") ||
      shown.querySelector("input:not([type=hidden]), select, textarea") ||
      shown;
    field.focus({ preventScroll: true });
  });

  // Below 760 px kvadmin.css lets each table scroll sideways (display: block): a table that
  // does scroll there becomes a tab stop, so the keyboard can scroll it too (WCAG 2.1.1); one
  // that fits is not (no empty tab stops on a wide screen).
  const keyboardScroll = () => {
    for (const table of document.querySelectorAll("main table")) {
      const scrolls = table.scrollWidth > table.clientWidth;
      if (scrolls && !table.hasAttribute("tabindex")) {
        table.tabIndex = 0;
        table.dataset.scrollStop = "";
      } else if (!scrolls && "scrollStop" in table.dataset) {
        table.removeAttribute("tabindex");
        delete table.dataset.scrollStop;
      }
    }
  };
  document.addEventListener("DOMContentLoaded", keyboardScroll);
  document.addEventListener("htmx:afterSettle", keyboardScroll);
  document.addEventListener("htmx:wsAfterMessage", keyboardScroll);
  window.addEventListener("resize", keyboardScroll);

  const root = document.documentElement;
  const systemDark = window.matchMedia("(prefers-color-scheme: dark)");
  const isDark = () => (root.dataset.theme || (systemDark.matches ? "dark" : "light")) === "dark";
  const toggle = document.querySelector(".theme-toggle");
  const showTheme = () => toggle?.setAttribute("aria-pressed", String(isDark()));
  // A choice equal to the system's is forgotten, so the page follows the system again.
  toggle?.addEventListener("click", () => {
    const theme = isDark() ? "light" : "dark";
    const system = systemDark.matches ? "dark" : "light";
    try {
      if (theme === system) localStorage.removeItem("kvadmin-theme");
      else localStorage.setItem("kvadmin-theme", theme);
    } catch (error) {
      // Storage refused: the choice lasts for this page only.
    }
    if (theme === system) delete root.dataset.theme;
    else root.dataset.theme = theme;
    themeChanged();
  });
  // Charts paint on a canvas with the colours of the moment: "kvadmin:theme" asks them to
  // draw again.
  function themeChanged() {
    showTheme();
    document.dispatchEvent(new CustomEvent("kvadmin:theme"));
  }
  systemDark.addEventListener("change", themeChanged);
  showTheme();

  const header = document.querySelector(".topbar");
  const menu = header?.querySelector(".nav-toggle");
  if (header && menu) {
    header.dataset.nav = "closed";
    menu.addEventListener("click", () => {
      const open = header.dataset.nav !== "open";
      header.dataset.nav = open ? "open" : "closed";
      menu.setAttribute("aria-expanded", String(open));
    });
  }

  const MEDIA = { gpu: "--m-gpu", cpu: "--m-cpu", cpu_pinned: "--m-cpu-pinned", disk: "--m-disk" };
  // A colour variable resolved to rgb() (a light-dark() one in the page's theme), as a
  // canvas needs it: read back from a probe element that paints with it.
  const cssVar = (name) => {
    const probe = document.createElement("span");
    probe.style.color = `var(${name})`;
    document.body.append(probe);
    const colour = getComputedStyle(probe).color;
    probe.remove();
    return colour;
  };
  window.kvadmin = {
    cssVar,
    // The colour kvadmin.css gives a medium (as medium_class does: unknown media share one).
    mediumColour: (medium) => {
      const name = (medium || "").trim().toLowerCase();
      return cssVar(name ? MEDIA[name] || "--m-other" : "--m-none");
    },
    // uPlot axis options in the page's theme (uPlot draws on a canvas, in black by default).
    axis: (options) => ({
      stroke: cssVar("--fg"),
      grid: { stroke: cssVar("--line") },
      ticks: { stroke: cssVar("--line") },
      ...options,
    }),
  };
})();
