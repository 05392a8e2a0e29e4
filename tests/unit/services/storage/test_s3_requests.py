"""The object target's data-plane requests against an endpoint in the test's process
(`fake_s3.py`): retried as botocore's standard mode retries, never reading more than an
answer may hold, never opening more connections than the pool's size, and telling the
tenant nothing the endpoint said."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.errors import DataCorrupt, StorageError, StorageUnavailable
from services.storage import s3
from services.storage.s3_requests import (
    ATTEMPTS,
    ERROR_BODY_BYTES,
    Malformed,
    S3Requests,
    TooLarge,
    TooSlow,
    Unreachable,
    backoff,
)
from services.storage.sigv4 import Signer
from tests.unit.services.storage.fake_s3 import FakeS3, Handler, UnixPool, error_body


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeS3]:
    server = FakeS3(tmp_path)
    yield server
    server.close()


def _requests(pool: UnixPool, slept: list[float] | None = None,
              min_rate: int = 1 << 20) -> S3Requests:
    return S3Requests(pool, Signer("AK", "SK", "us-east-1"), "b",
                      min_read_bytes_per_second=min_rate,
                      sleep=(slept.append if slept is not None else lambda _s: None))


def _status(status: int, code: str = "") -> object:
    def reply(handler: Handler) -> None:
        handler.answer(status, error_body(code) if code else b"")
    return reply


@pytest.fixture
def bucket(fake: FakeS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[s3.Bucket]:
    monkeypatch.setattr(s3, "ConnectionPool", lambda *_a: fake.pool())
    opened = s3.Bucket(fake.settings(tmp_path))
    opened._requests._sleep = lambda _s: None
    yield opened
    opened.close()


def test_objects_go_and_come_back_on_one_kept_alive_connection(bucket: s3.Bucket,
                                                               fake: FakeS3) -> None:
    blob = bytearray(b"sealed \x00 chunk" * 1000)
    bucket.put("chunks/p/ab/name with space+plus~", memoryview(blob))
    assert bucket.get("chunks/p/ab/name with space+plus~", limit=len(blob)) == blob
    assert bucket.size("chunks/p/ab/name with space+plus~") == len(blob)
    bucket.delete("chunks/p/ab/name with space+plus~")
    assert bucket.get("chunks/p/ab/name with space+plus~", limit=len(blob)) is None
    assert bucket.size("chunks/p/ab/name with space+plus~") is None
    bucket.delete("chunks/p/ab/name with space+plus~")  # gone already: no error
    assert [path for _, path, _ in fake.seen] == [
        "/b/p/chunks/p/ab/name%20with%20space%2Bplus~"] * 7
    assert fake.accepted == 1
    for _, _, headers in fake.seen:
        sent = {name.lower(): value for name, value in headers.items()}
        assert sent["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AK/")
        assert sent["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"


def test_slow_down_and_server_errors_are_tried_four_times_with_backoff(fake: FakeS3) -> None:
    slept: list[float] = []
    requests = _requests(fake.pool(), slept)
    fake.replies += [_status(503, "SlowDown"), _status(500, "InternalError"),  # type: ignore
                     _status(429)]
    assert requests.send("PUT", "k", memoryview(b"x")).status == 200
    assert (len(fake.seen), len(slept)) == (4, 3)
    # Throttling waits up to 1 s, then 4 s; a server error up to 0.1 s.
    assert slept[0] <= 1.0
    assert slept[1] <= 0.1
    assert slept[2] <= 4.0

    fake.seen.clear()
    fake.replies += [_status(503)] * 5  # type: ignore[list-item]
    assert requests.send("GET", "k", limit=10).status == 503
    assert len(fake.seen) == ATTEMPTS


@pytest.mark.parametrize(("status", "code"), [(400, "InvalidArgument"), (403, "AccessDenied"),
                                         (404, "NoSuchKey"), (412, "PreconditionFailed")])
def test_other_client_errors_are_not_tried_again(fake: FakeS3, status: int, code: str) -> None:
    fake.replies.append(_status(status, code))  # type: ignore[arg-type]
    answer = _requests(fake.pool()).send("PUT", "k", memoryview(b"x"))
    assert (answer.status, answer.code, len(fake.seen)) == (status, code, 1)


def test_backoff_is_jittered_and_capped() -> None:
    assert backoff(1, throttled=False, draw=lambda: 1.0) == 0.05
    assert backoff(3, throttled=True, draw=lambda: 1.0) == 4.0
    assert backoff(10, throttled=True, draw=lambda: 1.0) == 20.0
    assert backoff(2, throttled=True, draw=lambda: 0.0) == 0.0


def test_an_endpoint_that_cannot_be_reached_is_tried_four_times(tmp_path: Path) -> None:
    pool = UnixPool("http://s3.test", 2, 1.0)
    pool.socket_path = str(tmp_path / "nobody")
    slept: list[float] = []
    with pytest.raises(Unreachable) as raised:
        _requests(pool, slept).send("HEAD", "k")
    assert raised.value.connecting
    assert len(slept) == ATTEMPTS - 1


def test_a_get_longer_than_its_limit_is_refused_with_the_rest_unread(fake: FakeS3) -> None:
    sent: list[int] = []

    def huge(handler: Handler) -> None:  # announces 64 MiB, sends until the client hangs up
        handler.send_response(200)
        handler.send_header("Content-Length", str(64 << 20))
        handler.end_headers()
        total = 0
        try:
            while total < 64 << 20:
                handler.wfile.write(bytes(64 << 10))
                total += 64 << 10
        except OSError:
            pass
        sent.append(total)
        handler.close_connection = True

    def chunked(handler: Handler) -> None:  # no length, as S3 never answers a GetObject
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.wfile.write(b"401\r\n" + bytes(1025) + b"\r\n0\r\n\r\n")

    requests = _requests(fake.pool())
    fake.replies += [huge, chunked]
    with pytest.raises(TooLarge, match="67108864 bytes"):
        requests.send("GET", "k", limit=1024)
    with pytest.raises(Malformed, match="without its length"):
        requests.send("GET", "k", limit=1024)
    assert len(fake.seen) == 2  # neither tried again
    deadline = time.monotonic() + 5
    while not sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sent, "the endpoint never finished"
    assert sent[0] < 64 << 20, sent  # the client hung up


def test_an_error_body_is_read_only_up_to_a_few_kib(fake: FakeS3) -> None:
    def long_error(handler: Handler) -> None:
        handler.answer(403, error_body("AccessDenied") + b"x" * (8 << 20))

    fake.replies.append(long_error)
    answer = _requests(fake.pool()).send("PUT", "k", memoryview(b"x"))
    assert (answer.status, answer.code) == (403, "AccessDenied")
    assert ERROR_BODY_BYTES <= 4096
    # The connection went with the unread rest: the next request opens another.
    _requests(fake.pool()).send("PUT", "k", memoryview(b"x"))
    assert fake.accepted == 2


def test_a_trickled_body_is_abandoned_at_its_deadline(fake: FakeS3) -> None:
    def trickle(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "4096")
        handler.end_headers()
        try:
            for _ in range(4096):
                handler.wfile.write(b"x")
                handler.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass
        handler.close_connection = True

    fake.replies.append(trickle)
    # 0.3 s plus 4 KiB at 16 KiB/s: 0.55 s; each byte comes well within the 0.3 s.
    requests = _requests(fake.pool(timeout=0.3), min_rate=16 << 10)
    started = time.monotonic()
    with pytest.raises(TooSlow):
        requests.send("GET", "k", limit=4096)
    assert time.monotonic() - started < 1.5


def test_no_more_connections_are_open_than_the_pool_holds(fake: FakeS3) -> None:
    fake.objects["/b/k"] = b"v"
    requests = _requests(fake.pool(size=3))
    start = threading.Barrier(12)
    failed: list[BaseException] = []

    def work() -> None:
        start.wait()
        try:
            for _ in range(20):
                assert requests.send("HEAD", "k").length == 1
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=work) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not failed
    assert fake.most_open <= 3, fake.most_open
    assert fake.accepted <= 3, fake.accepted


def test_the_tenant_is_told_the_code_never_what_the_endpoint_wrote(
        bucket: s3.Bucket, fake: FakeS3) -> None:
    def odd(handler: Handler) -> None:
        handler.answer(400, b"<Error><Code>see http://evil.example/</Code></Error>")

    fake.replies += [_status(403, "AccessDenied"), odd,  # type: ignore[list-item]
                     _status(500, "InternalError")] + [_status(500)] * 3  # type: ignore
    with pytest.raises(StorageUnavailable, match=r"refused writing k .*\(AccessDenied\)"):
        bucket.put("k", b"x")
    with pytest.raises(StorageError) as raised:
        bucket.put("k", b"x")
    assert "evil" not in raised.value.message
    assert "(400)" in raised.value.message
    with pytest.raises(StorageError, match=r"failed reading k \(500\)"):
        bucket.get("k", limit=10)


def test_a_bucket_read_beyond_its_limit_is_data_corrupt(bucket: s3.Bucket) -> None:
    bucket.put("k", b"12345")
    with pytest.raises(DataCorrupt, match="is 5 bytes, more than the 4"):
        bucket.get("k", limit=4)


def test_proxy_variables_are_not_followed(bucket: s3.Bucket,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    bucket.put("k", b"v")  # a connect to the proxy would fail the unit tier
    assert bucket.get("k", limit=1) == b"v"


def test_objects_go_and_come_back_over_tls_on_one_kept_alive_connection(
        tmp_path: Path) -> None:
    """The pool opens its connections itself, the TLS handshake included, checking the
    endpoint's certificate and name."""
    fake = FakeS3(tmp_path, tls=True)
    try:
        requests = _requests(fake.pool())
        blob = memoryview(b"sealed chunk" * 100)
        assert requests.send("PUT", "k", blob).status == 200
        answer = requests.send("GET", "k", limit=len(blob))
        assert answer.body == blob
        assert requests.send("HEAD", "k").length == len(blob)
        assert fake.accepted == 1

        stranger = fake.pool()
        stranger._context = ssl.create_default_context()  # trusts no certificate of the fake's
        with pytest.raises(Unreachable) as raised:
            _requests(stranger).send("HEAD", "k")
        assert raised.value.connecting
    finally:
        fake.close()


def test_a_tls_handshake_trickled_by_the_endpoint_ends_at_the_deadline(tmp_path: Path) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "s3.sock"))
    listener.listen()
    trickled: list[float] = []

    def serve() -> None:
        conn, _ = listener.accept()
        started = time.monotonic()
        try:
            conn.recv(4096)  # its ClientHello
            conn.sendall(b"\x16\x03\x03\x40\x00")  # a handshake record of 16 KiB, then...
            while time.monotonic() - started < 2:
                conn.sendall(b"\x00")
                time.sleep(0.01)
        except OSError:
            pass
        trickled.append(time.monotonic() - started)
        conn.close()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    pool = UnixPool("https://s3.test", 1, 0.1)
    pool.socket_path = str(tmp_path / "s3.sock")
    started = time.monotonic()
    try:
        with pytest.raises((TooSlow, Unreachable)):
            _requests(pool).send("HEAD", "k")
        took = time.monotonic() - started
        server.join(3)
    finally:
        listener.close()
    assert took < 0.1 + ERROR_BODY_BYTES / (1 << 20) + 0.2, took
    assert trickled, "the endpoint never finished"
    assert trickled[0] < 1, trickled  # it was hung up on
