"""cairn-api's HTTP protocol: the bounded one (`services/bounded_http.py`) with the API's
settings: a request's line and headers within `api_max_header_bytes` (431) and complete
within `api_header_timeout_seconds` (408), and whatever of an answer the kernel could not
take at once taken within `api_send_timeout_seconds` (the connection is reset otherwise).
The body's bounds are the door's (`api/gate.py`, `api_body_timeout_seconds`)."""

from __future__ import annotations

from functools import lru_cache

from services.bounded_http import BoundedHttpToolsProtocol, HttpBounds
from services.settings import get_settings


@lru_cache(maxsize=1)
def _bounds() -> HttpBounds:
    settings = get_settings()
    return HttpBounds(max_header_bytes=settings.api_max_header_bytes,
                      header_seconds=settings.api_header_timeout_seconds,
                      send_seconds=settings.api_send_timeout_seconds)


class ApiHttpProtocol(BoundedHttpToolsProtocol):
    @classmethod
    def bounds(cls) -> HttpBounds:
        return _bounds()
