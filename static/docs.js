// Starts Swagger UI on /docs (a static file: the Content-Security-Policy allows no inline script).
(function () {
  var root = document.getElementById("swagger-ui");
  SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
})();
