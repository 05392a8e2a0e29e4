"""A webhook receiver on loopback for tests: records every request and answers from a
script (e.g. 500 three times, then 200)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.redis_server import free_port


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    status: int


@dataclass
class Receiver:
    answers: list[int] = field(default_factory=list)
    """Statuses to answer, in order; 200 once they are used up."""
    received: list[Received] = field(default_factory=list)
    port: int = field(default_factory=free_port)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                status = receiver.answers.pop(0) if receiver.answers else 200
                receiver.received.append(Received(
                    {k.lower(): v for k, v in self.headers.items()}, body, status))
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else b"receiver says no")

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def wait_for(self, count: int, timeout: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.received)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
