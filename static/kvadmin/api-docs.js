// /api/v1/docs: Swagger UI (static/vendor/swagger-ui) over the OpenAPI document, which the
// page's session may read. No inline script: the Content-Security-Policy allows none.
document.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("api-docs");
  if (!root || typeof SwaggerUIBundle !== "function") return;
  SwaggerUIBundle({
    url: root.dataset.document,
    domNode: root,
    deepLinking: true,
    // Links into the document must not fetch other servers' specs (?url=...).
    queryConfigEnabled: false,
    validatorUrl: null,
  });
});
