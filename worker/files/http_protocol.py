"""cairn-files' HTTP protocol: the bounded one (`services/bounded_http.py`) with bounds for
its one client, cairn-api, which sends a request's head in one write as soon as it has
connected. Its token is checked only once the headers are parsed, so these bounds are what
keeps a pod-network neighbour without it from holding memory or sockets.

- A request's line and headers: `HEAD_PER_API_HEAD` times the API's own bound
  (`api_max_header_bytes`) plus `API_HEADERS` (431 beyond). The relay re-encodes the query
  it was given (`urlencode` escapes each `/` of a path and each byte of a non-ASCII name as
  three bytes), and adds its own headers: the token, the project, Host, Connection,
  Accept-Encoding.
- Complete within `HEADER_SECONDS` of the connection's opening (408 beyond).
- No clock on the answer: cairn-api pauses its reading while its own client is slower than
  the download (`api/files_upstream.py`, HIGH_WATER), for as long as that client keeps
  within the API's deadlines. A download's own deadlines end one whose reader stalls
  (`files_download_min_bytes_per_second`, `files_download_max_seconds`)."""

from __future__ import annotations

from functools import lru_cache

from services.bounded_http import BoundedHttpToolsProtocol, HttpBounds
from services.settings import Settings, get_settings

HEAD_PER_API_HEAD = 3
API_HEADERS = 1024
HEADER_SECONDS = 5.0
"""The API writes a request's head at once: this leaves room for a loaded event loop."""

REFUSING = 32
"""Connections beside those worked on, for requests being refused (401, 429, 503) and the
probes of `/healthz`."""


def bounds(settings: Settings) -> HttpBounds:
    return HttpBounds(
        max_header_bytes=HEAD_PER_API_HEAD * settings.api_max_header_bytes + API_HEADERS,
        header_seconds=HEADER_SECONDS, send_seconds=None)


def connections(settings: Settings) -> int:
    """Open connections (and requests) the process takes at once; uvicorn answers 503 to
    more. A restore point is read for one project, and a project's requests at once are
    `files_per_project`: no more than `files_sessions` times that are ever worked on."""
    return settings.files_sessions * settings.files_per_project + REFUSING


@lru_cache(maxsize=1)
def _bounds() -> HttpBounds:
    return bounds(get_settings())


class FilesHttpProtocol(BoundedHttpToolsProtocol):
    @classmethod
    def bounds(cls) -> HttpBounds:
        return _bounds()
