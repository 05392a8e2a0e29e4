"""Slow and stalled clients against a real `cairn-api` process (uvicorn, real sockets): they
cost a buffer each and never the threads, database connections or answers of others."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.redis_server import free_port
from tests.support.stack import BIN, HEADERS, Process, Stack

pytestmark = pytest.mark.ceph

BODY_TIMEOUT = 3


@pytest.fixture(scope="module")
def api(stack: Stack) -> Iterator[str]:
    port = free_port()
    env = {**stack.env, "CAIRN_API_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT),
           "CAIRN_API_MAX_BODY_BYTES": str(64 * 1024)}
    process = Process("cairn-api", [str(BIN / "cairn-api"), "--port", str(port)], env,
                      stack.log_dir / "api-slow-clients.log")
    process.start("Uvicorn running")
    yield f"http://127.0.0.1:{port}"
    process.stop()


def stalled_upload(base: str, headers: dict[str, str]) -> socket.socket:
    """A POST that sends its headers and 10 of the 1000 bytes it announced, then nothing."""
    port = int(base.rsplit(":", 1)[1])
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    lines = [b"POST /v1/plans HTTP/1.1", b"Host: 127.0.0.1", b"Content-Type: application/json",
             b"Content-Length: 1000", *(f"{k}: {v}".encode() for k, v in headers.items())]
    conn.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + b'{"name": "')
    return conn


def read_until_closed(conn: socket.socket) -> str:
    """The whole answer: the server closes the connection after it (headers and body may
    come in separate segments)."""
    chunks = []
    while chunk := conn.recv(4096):
        chunks.append(chunk)
    return b"".join(chunks).decode()


# It times answers under 40 stalled uploads: alone, after the parallel phase.
@pytest.mark.serial
def test_stalled_uploads_leave_the_api_to_everyone_else(api: str) -> None:
    # Before: ten of these, without credentials, made /healthz and every tenant time out.
    stalled = [stalled_upload(api, {} if i % 2 else {"X-Project-Id": "attacker"})
               for i in range(40)]
    try:
        time.sleep(0.3)  # every stalled request is inside the server by now
        with httpx.Client(base_url=api, timeout=5) as client:
            timings = {}
            for path in ("/healthz", "/v1/plans", "/v1/jobs"):
                started = time.monotonic()
                response = client.get(path, headers=HEADERS)
                timings[path] = time.monotonic() - started
                assert response.status_code == 200, response.text
            print("with 40 stalled uploads:",
                  {p: f"{t * 1000:.0f} ms" for p, t in timings.items()})
            # Well under the body timeout: nothing waited for the stalled requests.
            assert max(timings.values()) < 1.0, timings
        # The stalled requests end with 408 once the body timeout passes, and close.
        stalled[0].settimeout(BODY_TIMEOUT + 5)
        answer = read_until_closed(stalled[0])
        assert answer.startswith("HTTP/1.1 408"), answer
        assert "body_timeout" in answer
    finally:
        for conn in stalled:
            conn.close()


def test_large_bodies_are_refused_before_they_are_read(api: str) -> None:
    with httpx.Client(base_url=api, timeout=5) as client:
        response = client.post("/v1/plans", content=b"x" * (64 * 1024 + 1),
                               headers={**HEADERS, "Content-Type": "application/json"})
        assert response.status_code == 413, response.text
        assert response.json()["error"]["code"] == "body_too_large"

        def chunks() -> Iterator[bytes]:
            for _ in range(100):
                yield b" " * 1024

        response = client.post("/v1/plans", content=chunks(),
                               headers={**HEADERS, "Content-Type": "application/json"})
        assert response.status_code == 413, response.text
        # A body within the limit still works, after the refusals.
        assert client.get("/v1/plans", headers=HEADERS).status_code == 200
