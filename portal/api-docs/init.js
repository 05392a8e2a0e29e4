// The API's reference at /docs: Swagger UI from the swagger-ui-dist package, served by
// cairn-api itself (no script from another origin runs beside the portal's session), on
// the API's own OpenAPI document. Loaded as a file: the page's Content-Security-Policy
// allows no inline script.
window.addEventListener("load", () => {
  window.ui = window.SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    presets: [window.SwaggerUIBundle.presets.apis],
    // Its default asks validator.swagger.io to judge the document: nothing leaves here.
    validatorUrl: null,
  });
});
