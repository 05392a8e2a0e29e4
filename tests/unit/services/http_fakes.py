"""What drives a bounded HTTP protocol (services/bounded_http.py) byte by byte without a
socket: a transport that records what the server writes, an application that answers, and
a connection made with a server's own protocol class."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from uvicorn.config import Config
from uvicorn.server import ServerState

from services.bounded_http import BoundedHttpToolsProtocol

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class Transport(asyncio.Transport):
    """What a socket's transport tells the protocol, and what the protocol did with it."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = self.aborted = False
        self.high: int | None = None
        self.protocol: BoundedHttpToolsProtocol | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def close(self) -> None:
        if not self.closed and self.protocol is not None:
            self.closed = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def abort(self) -> None:
        self.aborted = True
        self.close()

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("192.0.2.1", 40000), "sockname": ("127.0.0.1", 8787)}.get(
            name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high = high

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def answering(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the body, answers 200 with the headers it was given."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    names = b",".join(name for name, _ in scope["headers"])
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(names)).encode())]})
    await send({"type": "http.response.body", "body": names})


def connect(protocol_class: type[BoundedHttpToolsProtocol], app: App
            ) -> tuple[BoundedHttpToolsProtocol, Transport]:
    """A connection opened to a server of `protocol_class` serving `app`, in the running
    event loop."""
    config = Config(app=app, lifespan="off", timeout_keep_alive=60)
    protocol = protocol_class(config, ServerState(), {}, _loop=asyncio.get_running_loop())
    transport = Transport()
    transport.protocol = protocol
    protocol.connection_made(transport)
    return protocol, transport


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(scenario())  # type: ignore[arg-type]


def trickled_head(protocol_class: type[BoundedHttpToolsProtocol], head: bytes
                  ) -> tuple[bytes, float]:
    """What a server of `protocol_class` wrote to a client sending `head` a byte every
    10 ms (until the server closed the connection), and how long that took."""
    async def scenario() -> tuple[bytes, float]:
        protocol, transport = connect(protocol_class, answering)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for byte in head:
            if transport.closed:
                break
            protocol.data_received(bytes([byte]))
            await asyncio.sleep(0.01)
        return bytes(transport.written), loop.time() - started

    written: bytes
    took: float
    written, took = run(scenario)
    return written, took
