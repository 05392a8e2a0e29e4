"""Kept-alive connections that are no longer there: one idle past the pool's bound is not
reused, and one a middlebox dropped without a word (the request meets silence) costs the
request half its time, then it is sent again on a new connection, within the one deadline."""

from __future__ import annotations

import fcntl
import http.client
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.storage import http_pool
from services.storage.s3_requests import ERROR_BODY_BYTES, S3Requests, TooSlow, Unreachable
from services.storage.sigv4 import Signer
from tests.unit.services.storage.fake_s3 import FakeS3, Handler, UnixPool

TIMEOUT = 0.2
RATE = 1 << 20
ALLOWED = TIMEOUT + ERROR_BODY_BYTES / RATE
"""A DELETE's time in all."""


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeS3]:
    server = FakeS3(tmp_path)
    yield server
    server.close()


def _requests(pool: UnixPool) -> S3Requests:
    return S3Requests(pool, Signer("AK", "SK", "us-east-1"), "b",
                      min_read_bytes_per_second=RATE, sleep=lambda _s: None)


def _silent(handler: Handler) -> None:
    """The flow is gone: the request reaches nobody, and nothing comes back."""
    time.sleep(1.0)
    handler.close_connection = True


def _reset(handler: Handler) -> None:
    handler.close_connection = True  # closed on the request, unanswered


def test_a_silently_dropped_connection_is_tried_again_on_a_new_one(fake: FakeS3) -> None:
    requests = _requests(fake.pool(timeout=TIMEOUT))
    assert requests.send("DELETE", "k").status == 204
    fake.replies.append(_silent)
    started = time.monotonic()
    assert requests.send("DELETE", "k").status == 204
    took = time.monotonic() - started
    assert ALLOWED / 2 <= took < ALLOWED, took
    assert fake.accepted == 2


def test_a_connection_closed_on_its_request_is_still_tried_again(fake: FakeS3) -> None:
    requests = _requests(fake.pool(timeout=TIMEOUT))
    assert requests.send("DELETE", "k").status == 204
    fake.replies.append(_reset)
    assert requests.send("DELETE", "k").status == 204
    assert fake.accepted == 2


def test_an_endpoint_silent_on_every_connection_still_ends_at_the_deadline(
        fake: FakeS3) -> None:
    requests = _requests(fake.pool(timeout=TIMEOUT))
    assert requests.send("DELETE", "k").status == 204
    fake.replies += [_silent] * 4
    started = time.monotonic()
    with pytest.raises((TooSlow, Unreachable)):
        requests.send("DELETE", "k")
    assert time.monotonic() - started < ALLOWED + 0.05
    assert len(fake.seen) == 3  # the silent reused connection's attempt, and one more


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
