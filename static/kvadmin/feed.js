// The live feed: the newest MAX_ROWS decisions stay on the page (htmx's ws extension adds the
// rows the server sends), and a closed socket says so until it reconnects.
(function () {
  const MAX_ROWS = 200;
  document.addEventListener("DOMContentLoaded", () => {
    const feed = document.getElementById("feed");
    if (!feed) return;
    feed.addEventListener("htmx:wsAfterMessage", () => {
      const rows = document.getElementById("feed-rows");
      if (rows.querySelector(".decision")) rows.querySelector(".feed-empty")?.remove();
      while (rows.children.length > MAX_ROWS) rows.lastElementChild.remove();
    });
    feed.addEventListener("htmx:wsClose", () => {
      const status = document.getElementById("feed-status");
      status.dataset.state = "reconnecting";
      status.textContent = "reconnecting…";
    });
  });
})();
