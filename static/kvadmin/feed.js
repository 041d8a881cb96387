// The live feed. The server orders the whole decision log (newest, score or latency: the
// #feed-rows data-order) and sends the first page; "Show more" (#feed-more) fetches the page
// after its data-after cursor; htmx's ws extension adds the live rows the server sends.
//
// One invariant keeps paging consistent: every matching decision that ranks above the last
// row shown is shown. So after each live message, in a sorted order, rows are put in their
// place and a live row that ranks below the last row (while more pages remain) is dropped:
// the next page brings it. Beyond MAX_ROWS the lowest rows go, and the pager starts after
// the last row kept. A closed socket says so until it reconnects.
(function () {
  const MAX_ROWS = 200;

  // A row's place: [value, log id ms, log id seq], larger first.
  function place(row, order) {
    const [ms, seq] = row.dataset.logId.split("-").map(Number);
    const key = "order" + order.charAt(0).toUpperCase() + order.slice(1);
    return [order === "newest" ? 0 : Number(row.dataset[key] || 0), ms, seq];
  }
  function parse(cursor) {
    const [value, id] = cursor.split("_");
    return [Number(value), ...id.split("-").map(Number)];
  }
  function text([value, ms, seq]) {
    return `${value}_${ms}-${seq}`;
  }
  function compare(a, b) {
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] > b[i] ? -1 : 1;
    return 0;
  }

  function settle(rows) {
    const order = rows.dataset.order || "newest";
    const more = document.getElementById("feed-more");
    const decisions = Array.from(rows.querySelectorAll(":scope > .decision"));
    const places = new Map(decisions.map((row) => [row, place(row, order)]));
    if (order !== "newest") {
      decisions.sort((a, b) => compare(places.get(a), places.get(b)));
      const floor = more && !more.hidden && more.dataset.after ? parse(more.dataset.after) : null;
      const kept = floor ? decisions.filter((row) => compare(places.get(row), floor) <= 0) : decisions;
      decisions.filter((row) => !kept.includes(row)).forEach((row) => row.remove());
      decisions.length = 0;
      decisions.push(...kept);
      // In place: before the gap notes and the pager.
      rows.prepend(...decisions);
    }
    if (decisions.length > MAX_ROWS) {
      decisions.splice(MAX_ROWS).forEach((row) => row.remove());
      if (more) {
        more.hidden = false;
        more.dataset.after = text(places.get(decisions[decisions.length - 1]));
      }
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    const feed = document.getElementById("feed");
    if (!feed) return;
    feed.addEventListener("htmx:wsAfterMessage", () => {
      const rows = document.getElementById("feed-rows");
      if (rows.querySelector(".decision")) rows.querySelector(".feed-empty")?.remove();
      settle(rows);
    });
    feed.addEventListener("htmx:wsClose", () => {
      const status = document.getElementById("feed-status");
      status.dataset.state = "reconnecting";
      status.textContent = "reconnecting…";
    });
    // The pager asks for the page after its cursor (where the last row shown is).
    feed.addEventListener("htmx:configRequest", (event) => {
      const more = event.detail.elt.closest("#feed-more");
      if (more) event.detail.parameters.after = more.dataset.after;
    });
  });
})();
