"""Counts and times every answer of the API by route template (`/v1/jobs/{job_id}`, never
the id itself), including the ones its door refuses (408, 413, 429). Paths that match no
route count as `unmatched`, so a scanner's random paths add no series."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.metrics import events


class RequestMetrics:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets when the app raises before answering

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            method = str(scope.get("method", ""))
            events.api_requests.labels(method, route, str(status)).inc()
            events.api_request_seconds.labels(method, route).observe(
                time.perf_counter() - started)
