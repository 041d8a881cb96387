// The outage page (503, templates/unavailable.html) tries again by itself: it reloads after
// the server's Retry-After, then, each time it finds the outage still on, after twice as long,
// at most MAX_SECONDS apart, and counts down where the page says when. The attempts are
// remembered for this tab only (sessionStorage), and forgotten once they are old: a new outage
// starts at Retry-After again.
(function () {
  const MAX_SECONDS = 60;
  const KEY = "kvadmin-outage-retry";
  const notice = document.querySelector("[data-retry-after]");
  if (!notice) return;
  const first = Math.max(1, Number(notice.dataset.retryAfter) || 5);
  let attempts = 0;
  try {
    const last = JSON.parse(sessionStorage.getItem(KEY) || "null");
    if (last && Date.now() - last.at < 2 * MAX_SECONDS * 1000) attempts = last.attempts;
  } catch (error) {
    // Storage refused or garbled: start again from Retry-After.
  }
  let left = Math.min(first * 2 ** attempts, MAX_SECONDS);
  notice.dataset.wait = String(left); // this try's whole wait, as the countdown started
  const countdown = notice.querySelector("[data-countdown]");
  const show = () => {
    if (countdown) countdown.textContent = String(left);
  };
  show();
  const timer = setInterval(() => {
    left -= 1;
    show();
    if (left > 0) return;
    clearInterval(timer);
    try {
      sessionStorage.setItem(KEY, JSON.stringify({ attempts: attempts + 1, at: Date.now() }));
    } catch (error) {
      // Without storage every attempt waits Retry-After: still bounded by the server's figure.
    }
    window.location.reload();
  }, 1000);
})();
