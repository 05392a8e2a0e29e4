"""At most `limit` requests of one cairn-api process inside the app at once; the rest wait
(asynchronously, costing nothing) at the door. Each request holds a database session from
its dependency's setup to its cleanup, and both run on the thread pool: without a bound,
a burst of clients can take every pooled connection while the requests that would give one
back wait for a thread, and everything stalls until the pool's timeout."""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Receive, Scope, Send


class InFlightLimit:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self._semaphore: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._semaphore is None:  # made on first use, inside the server's event loop
            self._semaphore = asyncio.Semaphore(self.limit)
        async with self._semaphore:
            await self.app(scope, receive, send)
