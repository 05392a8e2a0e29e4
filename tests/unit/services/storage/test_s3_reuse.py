"""Kept-alive connections that are no longer there: one idle past the pool's bound is not
reused."""

from __future__ import annotations

import fcntl
import http.client
import resource
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.storage import http_pool
from services.storage.s3_requests import S3Requests
from services.storage.sigv4 import Signer
from tests.unit.services.storage.fake_s3 import FakeS3, UnixPool

TIMEOUT = 0.2
RATE = 1 << 20


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeS3]:
    server = FakeS3(tmp_path)
    yield server
    server.close()


def _requests(pool: UnixPool) -> S3Requests:
    return S3Requests(pool, Signer("AK", "SK", "us-east-1"), "b",
                      min_read_bytes_per_second=RATE, sleep=lambda _s: None)


def test_a_connection_idle_past_the_bound_is_not_reused(fake: FakeS3) -> None:
    pool = fake.pool(timeout=TIMEOUT)
    requests = _requests(pool)
    assert requests.send("DELETE", "k").status == 204
    assert requests.send("DELETE", "k").status == 204
    assert fake.accepted == 1
    pool.idle_seconds = 0.0
    assert requests.send("DELETE", "k").status == 204
    assert fake.accepted == 2


def test_an_idle_connection_on_a_descriptor_past_1024_is_reused_while_alive() -> None:
    """A busy worker's sockets pass descriptor 1024, where select() refuses: each idle
    connection then read as dropped and none was ever reused."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1100:
        pytest.skip("this process may not open descriptors past 1100")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    ours, peer = socket.socketpair()
    high = fcntl.fcntl(ours.fileno(), fcntl.F_DUPFD, 1100)
    ours.close()
    conn = http.client.HTTPConnection("127.0.0.1")
    conn.sock = socket.socket(fileno=high)
    try:
        assert conn.sock.fileno() >= 1024
        assert not http_pool._dropped(conn)
        peer.close()
        assert http_pool._dropped(conn)
    finally:
        conn.sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
