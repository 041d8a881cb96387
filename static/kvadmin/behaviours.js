// Behaviours the templates ask for with data attributes, instead of inline event handlers
// (which the Content-Security-Policy refuses).
// - <select data-submit-on-change>: submits its form when the choice changes;
// - <button data-copy="id">: copies the text of element #id to the clipboard;
// - <button data-remove-row-after-request>: after its htmx request, removes its table row.
(function () {
  document.addEventListener("change", (event) => {
    const select = event.target.closest("select[data-submit-on-change]");
    if (select && select.form) select.form.requestSubmit();
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
})();
