"""Every data-plane request ends by its deadline (`timeout` plus what it sends and may
receive at `min_read_bytes_per_second`), whatever the endpoint makes of the answer's framing:
a head sent a line at a time, a chunked answer whose chunk-size line or trailers never end,
interim answers, an error's body trickled; and a request that finds every connection held
waits for one no longer than that either."""

from __future__ import annotations

import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from services.errors import StorageError, StorageUnavailable
from services.storage import s3
from services.storage.http_pool import ConnectionPool, PoolBusy
from services.storage.s3_requests import (
    ATTEMPTS,
    ERROR_BODY_BYTES,
    Answer,
    Malformed,
    S3Requests,
    TooSlow,
    Unreachable,
)
from services.storage.sigv4 import Signer
from tests.unit.services.storage.fake_s3 import FakeS3, Handler, error_body

TIMEOUT = 0.1
RATE = 1 << 20
RUN = 2.0
"""How long each hostile reply below keeps going unless the client hangs up."""


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeS3]:
    server = FakeS3(tmp_path)
    yield server
    server.close()


def _requests(fake: FakeS3, slept: list[float] | None = None, size: int = 4) -> S3Requests:
    return S3Requests(fake.pool(size=size, timeout=TIMEOUT), Signer("AK", "SK", "us-east-1"),
                      "b", min_read_bytes_per_second=RATE,
                      sleep=(slept.append if slept is not None else lambda _s: None))


def _allowed(sent: int = 0, limit: int = ERROR_BODY_BYTES) -> float:
    return TIMEOUT + (sent + limit) / RATE


def _drip(handler: Handler, first: bytes, again: bytes, sent: list[int],
          every: float = 0.01) -> None:
    """Writes `first`, then `again` every `every` s for RUN s or until the client hangs
    up; `sent` gets how many bytes went."""
    total = 0
    started = time.monotonic()
    try:
        handler.wfile.write(first)
        handler.wfile.flush()
        total += len(first)
        while time.monotonic() - started < RUN:
            handler.wfile.write(again)
            handler.wfile.flush()
            total += len(again)
            time.sleep(every)
    except OSError:
        pass
    sent.append(total)
    handler.close_connection = True


def _timed(call: Callable[[], object]) -> tuple[BaseException | object, float]:
    started = time.monotonic()
    try:
        outcome: BaseException | object = call()
    except Exception as exc:
        outcome = exc
    return outcome, time.monotonic() - started


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_head_sent_a_line_at_a_time_is_abandoned_at_the_deadline(
        fake: FakeS3, method: str) -> None:
    sent: list[int] = []
    fake.replies.append(lambda handler: _drip(
        handler, b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n", b"X-A: b\r\n", sent))
    limit = 4 if method == "GET" else None
    outcome, took = _timed(lambda: _requests(fake).send(method, "k", limit=limit))
    assert isinstance(outcome, TooSlow), outcome
    assert took < _allowed(limit=limit or ERROR_BODY_BYTES) + 0.2, took
    assert len(fake.seen) == 1  # not tried again


@pytest.mark.parametrize(("request_", "answer", "framing"), [
    ("listing", b"200 OK", "trailers"),
    ("listing", b"200 OK", "chunk-size line"),
    ("PUT", b"403 Forbidden", "trailers"),
])
def test_a_chunked_answer_that_never_ends_is_cut_at_the_deadline(
        fake: FakeS3, request_: str, answer: bytes, framing: str) -> None:
    """Short lines, each far below http.client's 64 KiB line bound: only the deadline
    ends them."""
    sent: list[int] = []
    head = b"HTTP/1.1 " + answer + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
    if framing == "trailers":
        first, again = head + b"4\r\nabcd\r\n0\r\n", b"X-T: y\r\n"
    else:
        first, again = head + b"4", b";"
    fake.replies.append(lambda handler: _drip(handler, first, again, sent))
    requests = _requests(fake)
    if request_ == "listing":
        outcome, took = _timed(lambda: requests.listing([("list-type", "2")], limit=4096))
    else:
        outcome, took = _timed(lambda: requests.send("PUT", "k", memoryview(b"x")))
    assert isinstance(outcome, TooSlow), outcome
    assert took < _allowed(sent=1 if request_ == "PUT" else 0) + 0.2, took
    deadline = time.monotonic() + RUN + 1
    while not sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sent, "the endpoint never finished"
    assert sent[0] < 64 << 10, sent
    assert len(fake.seen) == 1


@pytest.mark.parametrize("interim", [b"100 Continue", b"103 Early Hints"])
def test_interim_answers_are_refused(fake: FakeS3, interim: bytes) -> None:
    """Cairn sends no Expect: a 1xx is no S3 answer. http.client would skip 100s for as
    long as they come, and take a 103 as the final answer, leaving the real one to be read
    as the next request's."""
    sent: list[int] = []
    fake.replies.append(lambda handler: _drip(
        handler, b"HTTP/1.1 " + interim + b"\r\n\r\n",
        b"HTTP/1.1 " + interim + b"\r\n\r\n", sent, every=0.05))
    outcome, took = _timed(lambda: _requests(fake).send("GET", "k", limit=4))
    assert isinstance(outcome, Malformed), outcome
    assert took < _allowed(limit=4) + 0.2, took
    assert len(fake.seen) == 1


def test_a_trickled_error_body_ends_at_the_deadline(fake: FakeS3) -> None:
    """A 500 whose body comes a byte at a time, each within the per-read timeout: the
    attempt ends at its deadline and is not tried again (each would take as long)."""
    sent: list[int] = []
    fake.replies += [lambda handler: _drip(
        handler, b"HTTP/1.1 500 Oops\r\nContent-Length: 4096\r\n\r\n", b"x", sent)] * 4
    slept: list[float] = []
    outcome, took = _timed(lambda: _requests(fake, slept).send("PUT", "k", memoryview(b"x")))
    assert isinstance(outcome, TooSlow), outcome
    assert took < _allowed(sent=1) + 0.2, took
    assert (len(fake.seen), slept) == (1, [])


def test_a_request_waits_for_a_held_connection_until_its_deadline(fake: FakeS3) -> None:
    requests = _requests(fake, size=1)
    pool = requests._pool
    held = pool.take()
    outcome: list[object] = []
    waiter = threading.Thread(target=lambda: outcome.append(_timed(
        lambda: requests.send("HEAD", "k"))), daemon=True)
    waiter.start()
    waiter.join(_allowed() + 0.5)
    alive = waiter.is_alive()
    pool.give(held, reusable=False)
    waiter.join(5)
    assert not alive, "still waiting for a connection past its deadline"
    [(failed, took)] = outcome
    assert isinstance(failed, PoolBusy), failed
    assert _allowed() - 0.02 < took < _allowed() + 0.2, took
    assert fake.seen == []


def test_the_bucket_tells_each_of_these_as_cairns_error(
        fake: FakeS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(s3, "ConnectionPool", lambda *_a: fake.pool(size=1, timeout=TIMEOUT))
    bucket = s3.Bucket(fake.settings(tmp_path, timeout_seconds=TIMEOUT,
                                     min_read_bytes_per_second=RATE))
    try:
        sent: list[int] = []
        fake.replies += [
            lambda handler: _drip(
                handler, b"HTTP/1.1 500 Oops\r\nContent-Length: 4096\r\n\r\n", b"x", sent),
            lambda handler: handler.wfile.write(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n")]
        with pytest.raises(StorageUnavailable, match="did not complete writing k within"):
            bucket.put("k", b"x")
        with pytest.raises(StorageError, match=r"reading k with an object's body without its "
                           r"length .* not the S3 store it should be"):
            bucket.get("k", limit=10)
        held = bucket._pool.take()
        try:
            with pytest.raises(StorageUnavailable, match=r"no connection .* came free"):
                bucket.size("k")
        finally:
            bucket._pool.give(held, reusable=False)
    finally:
        bucket.close()


@pytest.mark.parametrize(("head", "kind"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\nConnection: close\r\n\r\n", "object"),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 4096\r\n\r\n", "object"),
    (b"HTTP/1.1 403 Forbidden\r\nContent-Length: 4000\r\nConnection: close\r\n\r\n", "error"),
])
def test_a_trickled_body_after_connection_close_ends_at_the_deadline(
        fake: FakeS3, head: bytes, kind: str) -> None:
    """`http.client` drops the connection's socket as soon as an answer says it will close
    (HTTP/1.0 by default) and reads its body from the socket all the same: the deadline
    shuts the socket, not whatever the connection holds."""
    sent: list[int] = []
    fake.replies.append(lambda handler: _drip(handler, head, b"x", sent))
    outcome, took = _timed(lambda: _requests(fake).send("GET", "k", limit=4096))
    assert isinstance(outcome, TooSlow), outcome
    assert took < _allowed(limit=4096) + 0.2, took
    assert len(fake.seen) == 1


@pytest.mark.parametrize("lines", [1, 100])
def test_a_head_past_its_bound_is_refused_unread_in_bounded_memory(
        fake: FakeS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: int) -> None:
    """`http.client` alone takes 100 header lines of 64 KiB, and holds about twice that
    while parsing them (11 MiB an answer, for each request in flight)."""
    monkeypatch.setattr(s3, "ConnectionPool", lambda *_a: fake.pool(size=1, timeout=TIMEOUT))
    bucket = s3.Bucket(fake.settings(tmp_path, timeout_seconds=TIMEOUT,
                                     min_read_bytes_per_second=RATE))
    line = b"X-Filler: " + b"a" * (60 << 10) + b"\r\n"
    written: list[int] = []

    def huge_head(handler: Handler) -> None:
        total = 0
        try:
            handler.wfile.write(b"HTTP/1.1 404 Not Found\r\n")
            for _ in range(lines):
                total += handler.wfile.write(line)
            handler.wfile.write(b"Content-Length: 0\r\n\r\n")
        except OSError:
            pass
        written.append(total)
        handler.close_connection = True

    fake.replies.append(huge_head)
    tracemalloc.start()
    try:
        with pytest.raises(StorageError, match=r"a head of more than 16384 bytes, which S3 "
                                               r"never sends"):
            bucket.size("k")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        bucket.close()
    assert peak < 1 << 20, peak
    assert len(fake.seen) == 1  # not tried again


def test_each_address_of_the_endpoint_gets_only_what_is_left_of_the_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A name with five addresses that each drop the attempt (no SYN-ACK ever comes): the
    connect ends at the request's deadline, not five timeouts later."""
    timeout = 0.2
    tried: list[tuple[str, float | None]] = []

    def addresses(host: str, port: int, *_args: object, **_kwargs: object) -> object:
        assert host == "s3.hostile.test"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (f"192.0.2.{n}", port))
                for n in range(1, 6)]

    def dropped(sock: socket.socket, address: tuple[str, int]) -> None:
        tried.append((address[0], sock.gettimeout()))
        time.sleep(sock.gettimeout() or 0)
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "getaddrinfo", addresses)
    monkeypatch.setattr(socket.socket, "connect", dropped)
    requests = S3Requests(ConnectionPool("http://s3.hostile.test:9000", 1, timeout),
                          Signer("AK", "SK", "us-east-1"), "b",
                          min_read_bytes_per_second=RATE, sleep=lambda _s: None)
    outcome, took = _timed(lambda: requests.send("HEAD", "k"))
    allowed = timeout + ERROR_BODY_BYTES / RATE
    assert isinstance(outcome, (TooSlow, Unreachable)), outcome
    assert took < allowed + 0.1, (took, tried)
    assert sum(given or 0 for _, given in tried) <= allowed + 0.01, tried


def test_a_name_that_is_not_resolved_in_time_ends_the_request_at_its_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`getaddrinfo` cannot be interrupted: the request stops waiting for it."""
    timeout = 0.2
    released = threading.Event()
    lookups: list[str] = []

    def slow(host: str, *_args: object, **_kwargs: object) -> object:
        lookups.append(host)
        released.wait(2)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    requests = S3Requests(ConnectionPool("http://s3.slow-dns.test", 1, timeout),
                          Signer("AK", "SK", "us-east-1"), "b",
                          min_read_bytes_per_second=RATE, sleep=lambda _s: None)
    try:
        outcome, took = _timed(lambda: requests.send("HEAD", "k"))
    finally:
        released.set()
    assert isinstance(outcome, (TooSlow, Unreachable)), outcome
    assert took < timeout + ERROR_BODY_BYTES / RATE + 0.1, took
    assert lookups == ["s3.slow-dns.test"]


def test_attempts_each_failed_just_before_the_deadline_share_one_deadline(
        fake: FakeS3) -> None:
    """Each attempt's head trickles until just before its deadline, then says 503
    SlowDown: retried as it is, four attempts would take four deadlines."""
    timeout = 0.3
    allowed = timeout + ERROR_BODY_BYTES / RATE
    body = error_body("SlowDown")

    def slow_down(handler: Handler) -> None:
        started = time.monotonic()
        handler.wfile.write(b"HTTP/1.1 503 Slow Down\r\n")
        while time.monotonic() - started < 0.85 * allowed:
            handler.wfile.write(b"X-Pad: y\r\n")
            time.sleep(0.01)
        handler.wfile.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    fake.replies += [slow_down] * ATTEMPTS
    requests = S3Requests(fake.pool(timeout=timeout), Signer("AK", "SK", "us-east-1"), "b",
                          min_read_bytes_per_second=RATE, sleep=lambda _s: None)
    outcome, took = _timed(lambda: requests.send("DELETE", "k"))
    assert isinstance(outcome, Answer), outcome
    assert outcome.code == "SlowDown"
    assert took < 1.2 * allowed, took
    assert len(fake.seen) == 1


def test_throttling_answered_at_once_is_still_tried_four_times_within_the_deadline(
        fake: FakeS3) -> None:
    """Legitimate throttling keeps its attempts: each backoff is cut short to leave the next
    attempt half the request's time, never skipped for it."""
    timeout = 0.2
    allowed = timeout + ERROR_BODY_BYTES / RATE
    fake.replies += [lambda handler: handler.answer(503, error_body("SlowDown"))] * 3
    slept: list[float] = []
    requests = S3Requests(fake.pool(timeout=timeout), Signer("AK", "SK", "us-east-1"), "b",
                          min_read_bytes_per_second=RATE, sleep=slept.append)
    assert requests.send("DELETE", "k").status == 204
    assert len(fake.seen) == ATTEMPTS
    assert len(slept) == ATTEMPTS - 1
    assert all(0 <= seconds <= allowed / 2 for seconds in slept), slept
