"""Slow and stalled clients against a real `cairn-api` process (uvicorn, real sockets): they
cost a buffer each and never the threads, database connections or answers of others. Every
phase of a connection is bounded in size and in time, and nothing a client sends resets
the clock: its headers (blank lines between requests included), what of its request is not
the body (chunk framing, trailers), its body, and the answer it must take."""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.redis_server import free_port
from tests.support.stack import BIN, HEADERS, Process, Stack

pytestmark = pytest.mark.ceph

BODY_TIMEOUT = 3
HEADER_TIMEOUT = 2
SEND_TIMEOUT = 2


@pytest.fixture(scope="module")
def api(stack: Stack) -> Iterator[str]:
    port = free_port()
    env = {**stack.env, "CAIRN_API_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT),
           "CAIRN_API_MAX_BODY_BYTES": str(64 * 1024),
           "CAIRN_API_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT),
           "CAIRN_API_SEND_TIMEOUT_SECONDS": str(SEND_TIMEOUT)}
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


def _connect(base: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])))


def _answer_to(base: str, request: bytes) -> str:
    conn = _connect(base)
    conn.settimeout(10)
    try:
        # The server may close before it has read everything: its answer counts.
        with contextlib.suppress(OSError):
            conn.sendall(request)
        return _answer_before_reset(conn)
    finally:
        conn.close()


def _answer_before_reset(conn: socket.socket) -> str:
    """What the server wrote before it closed: a close with our bytes unread reaches us as a
    reset after the answer."""
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := conn.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode()


@pytest.mark.production_database_only
def test_oversized_headers_are_refused_with_431(api: str) -> None:
    # Before: httptools has no limit (the 16 KiB one applied to h11 only): answered 200.
    one_large = _answer_to(api, b"GET /healthz HTTP/1.1\r\nHost: cairn\r\nX-Large: "
                           + b"a" * 100_000 + b"\r\nConnection: close\r\n\r\n")
    assert one_large.startswith("HTTP/1.1 431"), one_large[:200]
    assert "headers_too_large" in one_large
    many_small = _answer_to(api, b"GET /healthz HTTP/1.1\r\nHost: cairn\r\n" + b"".join(
        b"X-Header-%d: %s\r\n" % (i, b"b" * 100) for i in range(200))
        + b"Connection: close\r\n\r\n")
    assert many_small.startswith("HTTP/1.1 431"), many_small[:200]
    long_target = _answer_to(api, b"GET /healthz?" + b"q" * 20_000
                             + b" HTTP/1.1\r\nHost: cairn\r\nConnection: close\r\n\r\n")
    assert long_target.startswith("HTTP/1.1 431"), long_target[:200]
    # A header that never ends is cut off once it passes the limit, not read for good.
    endless = _connect(api)
    endless.settimeout(10)
    endless.sendall(b"GET /healthz HTTP/1.1\r\nHost: cairn\r\nX-Endless: ")
    sent, cap = 0, 64 * 1024 * 1024
    with contextlib.suppress(OSError):
        while sent < cap:
            endless.sendall(b"e" * 65536)
            sent += 65536
    assert sent < cap, "the server read 64 MiB of one header without closing"
    endless.close()
    # Ordinary requests, with the largest headers a client really sends, pass.
    fine = _answer_to(api, b"GET /healthz HTTP/1.1\r\nHost: cairn\r\nX-Auth-Token: "
                      + b"t" * 8000 + b"\r\nConnection: close\r\n\r\n")
    assert fine.startswith("HTTP/1.1 200"), fine[:200]


@pytest.mark.production_database_only
def test_headers_sent_a_byte_a_second_are_cut_off_at_the_deadline(api: str) -> None:
    # Before: uvicorn times nothing until a request's headers are complete, so each of
    # these held its connection for as long as the client liked.
    trickling, silent = _connect(api), _connect(api)
    try:
        started = time.monotonic()
        trickling.sendall(b"GET /healthz HTTP/1.1\r\nHost: cairn\r\nX-Slow: ")
        answer = b""
        for _ in range(HEADER_TIMEOUT * 4):  # one byte a second, for up to 4 deadlines
            try:
                trickling.sendall(b"x")
            except OSError:
                break
            if select.select([trickling], [], [], 1.0)[0]:
                answer = _answer_before_reset(trickling).encode()
                break
        cut_after = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"header_timeout" in answer
        assert cut_after < HEADER_TIMEOUT + 1.5, cut_after
        # A connection that never sends a byte is cut off in the same time.
        silent.settimeout(HEADER_TIMEOUT + 3)
        assert _answer_before_reset(silent).startswith("HTTP/1.1 408")
        assert time.monotonic() - started < HEADER_TIMEOUT + 2.5
    finally:
        trickling.close()
        silent.close()
    with httpx.Client(base_url=api, timeout=5) as client:
        assert client.get("/healthz").status_code == 200


@pytest.mark.production_database_only
def test_blank_lines_between_requests_do_not_hold_a_connection(api: str) -> None:
    # Before: each blank line stopped uvicorn's keep-alive timer, and llhttp skips blank
    # lines before a request, so the header clock never started: held for good.
    conn = _connect(api)
    try:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: cairn\r\n\r\n")
        conn.settimeout(5)
        first = b""
        while b'"ok"}' not in first:
            first += conn.recv(4096)
        assert first.startswith(b"HTTP/1.1 200"), first
        started = time.monotonic()
        answer = b""
        while time.monotonic() - started < HEADER_TIMEOUT * 4:
            try:
                conn.sendall(b"\r\n")
            except OSError:
                break
            if select.select([conn], [], [], 0.5)[0]:
                answer = _answer_before_reset(conn).encode()
                break
        cut_after = time.monotonic() - started
    finally:
        conn.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert cut_after < HEADER_TIMEOUT + 1.5, cut_after


@pytest.mark.production_database_only
def test_a_chunked_bodys_trailers_are_bounded_and_refused(api: str) -> None:
    # Before: nothing counted a trailer's bytes, and httptools appended each read to the
    # value it was building, in the event loop: 77 MB took /healthz to 16.6 s.
    endless = _connect(api)
    endless.settimeout(10)
    endless.sendall(b"POST /v1/session HTTP/1.1\r\nHost: cairn\r\nContent-Type: "
                    b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"2\r\n{}\r\n0\r\nX-Trailer: ")
    sent, cap = 0, 64 * 1024 * 1024
    with httpx.Client(base_url=api, timeout=5) as client:
        probes = []
        with contextlib.suppress(OSError):
            while sent < cap:
                endless.sendall(b"t" * 65536)
                sent += 65536
                if sent % (1024 * 1024) == 0:
                    started = time.monotonic()
                    assert client.get("/healthz").status_code == 200
                    probes.append(time.monotonic() - started)
        endless.close()
        assert sent < 16 * 1024 * 1024, f"the server read {sent} bytes of trailer"
        assert max(probes, default=0) < 1.0, probes
        # A complete trailer is refused: a header after the door read the headers (one
        # naming a token, say) never reaches the application.
        answer = _answer_to(api, b"POST /v1/plans HTTP/1.1\r\nHost: cairn\r\n"
                            b"X-Project-Id: project-a\r\nContent-Type: application/json\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n"
                            b"X-Roles: admin\r\n\r\n")
        assert answer.startswith("HTTP/1.1 400"), answer[:200]
        assert "trailers_refused" in answer
        assert client.get("/healthz").status_code == 200


def _server_side(api: str, client: socket.socket) -> str | None:
    """The TCP state of the server's end of `client`'s connection (None when the server
    holds none), from /proc/net/tcp."""
    server_port = int(api.rsplit(":", 1)[1])
    client_port = client.getsockname()[1]
    states = {"01": "ESTABLISHED", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT",
              "07": "CLOSE", "08": "CLOSE_WAIT", "0A": "LISTEN", "0B": "CLOSING"}
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if int(local.split(":")[1], 16) == server_port \
                    and int(remote.split(":")[1], 16) == client_port:
                return states.get(state, state)
    return None


@pytest.mark.production_database_only
def test_a_client_that_stops_reading_loses_its_connection(api: str) -> None:
    # Forty pipelined /openapi.json (6 MB) that the client never reads: past what the
    # kernel buffers (4 MiB), the rest waits in the server. Before: after the send timeout
    # uvicorn closed the connection gracefully, which waits for the client to take what is
    # left, for good: the connection stayed, counted against --limit-concurrency.
    conn = socket.socket()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn.connect(("127.0.0.1", int(api.rsplit(":", 1)[1])))
    try:
        conn.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: cairn\r\n\r\n" * 40)
        deadline = time.monotonic() + SEND_TIMEOUT * 2 + 10
        state = _server_side(api, conn)
        while state is not None and time.monotonic() < deadline:
            time.sleep(0.2)
            state = _server_side(api, conn)
        assert state is None, f"the server still holds the connection ({state})"
    finally:
        conn.close()
    with httpx.Client(base_url=api, timeout=5) as client:
        assert client.get("/healthz").status_code == 200


@pytest.mark.production_database_only
def test_a_caller_without_credentials_sends_no_large_body(api: str) -> None:
    # Before: the body was read before the caller was known: "100 Continue" to anyone,
    # and up to CAIRN_API_MAX_BODY_BYTES buffered for a request that would be refused.
    conn = _connect(api)
    conn.settimeout(10)
    try:
        conn.sendall(b"POST /v1/plans HTTP/1.1\r\nHost: cairn\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 60000\r\n"
                     b"Expect: 100-continue\r\n\r\n")
        answer = _answer_before_reset(conn)
    finally:
        conn.close()
    assert answer.startswith("HTTP/1.1 413"), answer[:200]
    assert "100 Continue" not in answer
    # With credentials (noauth: the project named), the same body is read.
    response = httpx.post(f"{api}/v1/plans", timeout=10, headers={
        **HEADERS, "Content-Type": "application/json"}, content=b" " * 60000 + b"{}")
    assert response.status_code == 422, response.text
