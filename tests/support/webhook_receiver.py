"""Webhook receivers on loopback for tests.

`Receiver` runs in the test's process: it records every request, answers from a script
(e.g. 500 three times, then 200), and counts the TCP connections it accepted (a test that
must show no connection ever reached an address counts them, requests or not).

`HostileReceiver` is a process of its own (`python -m tests.support.webhook_receiver
--mode trickle|flood`), as a receiver out on the internet would be:
- trickle: answers one byte of its status line every `--interval` seconds, forever;
- flood: answers 500 with a body that never ends, as fast as the client reads it."""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.redis_server import free_port

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    status: int
    target: str = "/"
    at: float = field(default_factory=time.time)
    """When it arrived (wall clock)."""


class _CountingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: Any) -> None:
        self.connections = 0
        super().__init__(address, handler)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        self.connections += 1
        return True


@dataclass
class Receiver:
    answers: list[int] = field(default_factory=list)
    """Statuses to answer, in order; 200 once they are used up."""
    received: list[Received] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    body: bytes = b""
    """What a failing answer says (a 2xx says `ok`)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Headers every answer carries (a redirect's Location)."""

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                status = receiver.answers.pop(0) if receiver.answers else 200
                receiver.received.append(Received(
                    {k.lower(): v for k, v in self.headers.items()}, body, status, self.path))
                self.send_response(status)
                for name, value in receiver.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else receiver.body or b"receiver says no")

            def log_message(self, *_args: object) -> None:
                pass

        self.server = _CountingServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    @property
    def connections(self) -> int:
        """TCP connections accepted so far, whether a request came over them or not."""
        return self.server.connections

    def wait_for(self, count: int, timeout: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.received)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class HostileReceiver:
    """A hostile receiver process on loopback; `close` kills it."""

    def __init__(self, mode: str, interval: float = 1.0) -> None:
        self.mode = mode
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.webhook_receiver", "--mode", mode,
             "--port", str(self.port), "--interval", str(interval)],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.close()
        raise RuntimeError(f"the {mode} receiver did not start on port {self.port}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def _serve_hostile(mode: str, port: int, interval: float) -> None:
    listener = socket.create_server(("127.0.0.1", port), backlog=128)

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(30)
                conn.recv(65536)  # the request (its rest, if any, is never read)
                if mode == "trickle":
                    # A status line, then a header that never ends: the head is never
                    # complete, yet a byte always arrives before a per-read timeout.
                    head = b"HTTP/1.1 200 OK\r\nx-trickle: "
                    for sent in itertools.count():
                        conn.sendall(head[sent:sent + 1] if sent < len(head) else b"a")
                        time.sleep(interval)
                conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\n"
                             b"content-type: text/plain\r\n\r\n")
                chunk = b"flood " * 10923  # 64 KiB
                while True:
                    conn.sendall(chunk)
            except OSError:
                return  # the client went away: what it should do

    while True:
        conn, _ = listener.accept()
        threading.Thread(target=answer, args=(conn,), daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["trickle", "flood"], required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--interval", type=float, default=1.0,
                        help="trickle: seconds between bytes")
    args = parser.parse_args()
    _serve_hostile(args.mode, args.port, args.interval)


if __name__ == "__main__":
    main()
