// Freshness of live pages, sortable and filterable tables.
//
// Freshness: every live page has one marker, <p data-freshness data-period="S">, rendered
// by templates/_freshness.html with the time its data was read (<time>). The server replaces
// the marker with each update (a websocket frame, or a poll that htmx swaps in). A marker that
// is not replaced for three periods, or whose page's socket closed or whose poll failed, turns
// visibly stale: "stale: <why>; last good update at <time>" (role=alert). A paused feed renders
// its marker with data-state="paused" itself; a paused marker never turns stale.
//
// Sorting: <table data-sortable> sorts client-side by the clicked <th> (numbers by
// data-sort-value when a cell has one), and remembers the column and direction in the URL
// (?sort=<column key>&dir=asc|desc), so a sorted view can be shared and reloaded.
(function () {
  const seen = new WeakMap();

  function markers() {
    return document.querySelectorAll("[data-freshness]");
  }

  function stale(marker, reason) {
    if (marker.dataset.state === "stale" || marker.dataset.state === "paused") return;
    const time = marker.querySelector("time");
    marker.dataset.state = "stale";
    marker.setAttribute("role", "alert");
    const prefix = `stale: ${reason}; last good update at `;
    marker.replaceChildren(prefix, ...(time ? [time] : ["never"]));
  }

  function check() {
    const now = Date.now();
    for (const marker of markers()) {
      if (!seen.has(marker)) seen.set(marker, now);
      const period = Number(marker.dataset.period || 2) * 1000;
      if (now - seen.get(marker) > 3 * period) stale(marker, "no update for a while");
    }
  }

  function staleWithin(root, reason) {
    for (const marker of markers()) {
      const scope = marker.dataset.liveRoot ? document.querySelector(marker.dataset.liveRoot) : null;
      if (!scope || scope === root || scope.contains(root) || root.contains(scope)) stale(marker, reason);
    }
  }

  document.addEventListener("htmx:wsClose", (event) =>
    staleWithin(event.target, "the connection to the server was lost"),
  );
  document.addEventListener("htmx:responseError", (event) =>
    staleWithin(event.target, "the refresh failed"),
  );
  document.addEventListener("htmx:sendError", (event) =>
    staleWithin(event.target, "the server did not answer"),
  );
  document.addEventListener("DOMContentLoaded", check);
  setInterval(check, 1000);

  // Sorting.
  function cellValue(row, index) {
    const cell = row.cells[index];
    if (!cell) return "";
    const value = cell.dataset.sortValue ?? cell.textContent.trim();
    const number = Number(value);
    return value !== "" && !Number.isNaN(number) ? number : value.toLowerCase();
  }

  function sortTable(table, key, dir) {
    const headers = Array.from(table.tHead.rows[0].cells);
    const index = headers.findIndex((th) => th.dataset.sortKey === key);
    if (index < 0) return;
    const body = table.tBodies[0];
    const rows = Array.from(body.rows).filter((row) => !row.dataset.noSort);
    const sign = dir === "desc" ? -1 : 1;
    rows.sort((a, b) => {
      const x = cellValue(a, index);
      const y = cellValue(b, index);
      if (typeof x === typeof y) return (x < y ? -1 : x > y ? 1 : 0) * sign;
      return (typeof x === "number" ? -1 : 1) * sign;
    });
    body.append(...rows);
    headers.forEach((th) => th.removeAttribute("aria-sort"));
    headers[index].setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
  }

  function sortFromUrl() {
    const params = new URLSearchParams(location.search);
    const key = params.get("sort");
    if (!key) return;
    for (const table of document.querySelectorAll("table[data-sortable]")) {
      sortTable(table, key, params.get("dir") === "desc" ? "desc" : "asc");
    }
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("table[data-sortable] th[data-sort-key] button");
    if (!button) return;
    const th = button.closest("th");
    const table = th.closest("table");
    const dir = th.getAttribute("aria-sort") === "ascending" ? "desc" : "asc";
    sortTable(table, th.dataset.sortKey, dir);
    const url = new URL(location.href);
    url.searchParams.set("sort", th.dataset.sortKey);
    url.searchParams.set("dir", dir);
    history.replaceState(null, "", url);
  });
  // Filtering: <form data-filters-for="ID"> holds selects named after the rows' data
  // attributes (<tr data-model=...>); rows of <table id="ID" data-filterable> that differ from
  // a chosen value are hidden, the form's <output data-match-count-for="ID"> says how many
  // match, and the choices live in the URL (?model=...&state=...).
  function filterTable(form) {
    const table = document.getElementById(form.dataset.filtersFor);
    if (!table) return;
    const chosen = Array.from(form.elements).filter((el) => el.name && el.value);
    const rows = Array.from(table.tBodies[0].rows).filter((row) => !row.dataset.noSort);
    let shown = 0;
    for (const row of rows) {
      const match = chosen.every((el) => row.dataset[el.name] === el.value);
      row.hidden = !match;
      shown += match;
    }
    const count = form.querySelector(`[data-match-count-for="${form.dataset.filtersFor}"]`);
    if (count) count.textContent = `${shown} of ${rows.length} shown`;
    table.dataset.shown = String(shown);
  }

  function filtersFromUrl() {
    const params = new URLSearchParams(location.search);
    for (const form of document.querySelectorAll("form[data-filters-for]")) {
      for (const el of form.elements) if (el.name && params.has(el.name)) el.value = params.get(el.name);
      filterTable(form);
    }
  }

  document.addEventListener("change", (event) => {
    const form = event.target.closest("form[data-filters-for]");
    if (!form) return;
    filterTable(form);
    const url = new URL(location.href);
    for (const el of form.elements) {
      if (!el.name) continue;
      if (el.value) url.searchParams.set(el.name, el.value);
      else url.searchParams.delete(el.name);
    }
    history.replaceState(null, "", url);
  });
  document.addEventListener("submit", (event) => {
    if (event.target.matches("form[data-filters-for]")) event.preventDefault();
  });

  // Time range: the dashboard and the pod pages share one. The last range chosen is kept in
  // this browser and applied to a page with a range control whose URL names none.
  const RANGE_KEY = "kvadmin-time-range";
  document.addEventListener("submit", (event) => {
    const form = event.target.closest("form[data-time-range]");
    if (!form) return;
    const custom = form.elements.range.value === "custom";
    // A preset needs no bounds: leave them out of the URL.
    form.elements.from.disabled = form.elements.to.disabled = !custom;
    localStorage.setItem(RANGE_KEY, new URLSearchParams(new FormData(form)).toString());
  });
  document.addEventListener("change", (event) => {
    const select = event.target.closest("form[data-time-range] select[name=range]");
    if (select && select.value !== "custom") select.form.requestSubmit();
  });
  function rangeFromStorage() {
    if (!document.querySelector("form[data-time-range]")) return;
    const url = new URL(location.href);
    const stored = localStorage.getItem(RANGE_KEY);
    if (url.searchParams.has("range") || !stored) return;
    for (const [name, value] of new URLSearchParams(stored)) url.searchParams.set(name, value);
    if (url.searchParams.get("range") !== "1h" || url.searchParams.has("from")) location.replace(url);
  }
  rangeFromStorage();

  function restore() {
    sortFromUrl();
    filtersFromUrl();
  }
  document.addEventListener("DOMContentLoaded", restore);
  // Live tables are replaced by the server: keep the chosen order and filters.
  document.addEventListener("htmx:oobAfterSwap", restore);
  document.addEventListener("htmx:afterSwap", restore);
})();
