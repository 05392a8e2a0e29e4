"""The web portal's static files at `/`: the built single-page app, its hashed assets cached
for good, and index.html for every other path that is not the API's, so the app's own
routes (`/volumes/...`) load on a reload or a shared link."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.errors import NotFound

# The app loads nothing from elsewhere: a script injected into a page could not send what
# it read to another site, nor could another site frame the portal.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; "
                               "base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}
ASSET_CACHE = b"public, max-age=31536000, immutable"
"""Vite names every asset by a hash of its content: a changed file is a new name."""
API_PREFIXES = ("v1", "openapi.json", "docs", "redoc", "metrics", "healthz", "readyz")


def install(app: FastAPI, directory: Path | None) -> bool:
    """Serve the portal when it was built; returns whether it was."""
    if directory is None or not (directory / "index.html").is_file():
        return False
    root = directory.resolve()
    index = root / "index.html"
    if (root / "assets").is_dir():
        # Compressed on the way out (the initial script is a third of its size gzipped);
        # the API's JSON is left as it is.
        assets = GZipMiddleware(_cached_for_good(StaticFiles(directory=root / "assets")),
                                minimum_size=1024)
        app.mount("/assets", assets, name="portal-assets")

    @app.get("/{path:path}", include_in_schema=False)
    async def portal(path: str) -> Response:
        if path.split("/", 1)[0] in API_PREFIXES:
            raise NotFound(f"no such API path: /{path}; the API's paths start with /v1 "
                           "(see /docs)")
        wanted = (root / path).resolve()
        if path and wanted.is_file() and wanted.is_relative_to(root):
            return FileResponse(wanted, headers=PAGE_HEADERS)
        return FileResponse(index, headers=PAGE_HEADERS)

    return True


def _cached_for_good(inner: ASGIApp) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_cached(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                message["headers"] = [*message.get("headers", []),
                                      (b"cache-control", ASSET_CACHE)]
            await send(message)

        await inner(scope, receive, send_cached)

    return app
