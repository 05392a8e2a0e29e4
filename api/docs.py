"""The API's reference at `/docs`: Swagger UI, served from the portal's build (`make portal`
copies it from the swagger-ui-dist npm package into `dist/api-docs/`), never from a CDN.

FastAPI's own /docs and /redoc load their scripts and fonts from a CDN into a page on the
portal's origin: whoever serves (or takes over) that CDN runs script beside the session
cookie, which may read `GET /v1/session`'s CSRF token and act as the signed-in user. Here
every file comes from cairn-api itself, the page runs no inline script, and its
Content-Security-Policy lets it load nothing from anywhere else. Without a built portal
there is no /docs (404, saying so); /openapi.json is always served. /redoc, FastAPI's
second viewer, leads to /docs."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from services.errors import NotFound

DOCS_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' "
                               "'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
                               "font-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
                               "form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}
"""Swagger UI sets inline styles (style attributes), hence 'unsafe-inline' for styles only."""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Cairn API reference</title>
<link rel="stylesheet" href="/api-docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/api-docs/swagger-ui-bundle.js"></script>
<script src="/api-docs/init.js"></script>
</body>
</html>
"""


def install(app: FastAPI, portal_dir: Path | None) -> None:
    """Routes /docs and /redoc; create the app with docs_url and redoc_url None."""
    built = portal_dir is not None and (portal_dir / "api-docs" / "init.js").is_file()

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Response:
        if not built:
            raise NotFound("the API reference is served with the portal's build (make "
                           "portal); the OpenAPI document is at /openapi.json")
        return HTMLResponse(PAGE, headers=DOCS_HEADERS)

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> Response:
        return RedirectResponse("/docs", status_code=308)
