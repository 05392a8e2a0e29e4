"""The object target's requests (PUT, conditional or not, GET, HEAD, DELETE of one key, and
ListObjectsV2's pages), signed (`sigv4.py`) and sent on pooled keep-alive connections
(`http_pool.py`), without botocore: its request and response objects, event hooks and
model lookups cost about 4.7 ms of CPU per 4 MiB PUT and 1.4 ms per HEAD (bench/README.md,
2026-11-26), most of a first full's client CPU besides sealing; and it reads an answer
whole whatever its size, where these read no more than the answer can legitimately be.

Retries are botocore's "standard" mode: 4 attempts in all, after a connection error or
timeout, a 500, 502, 503 or 504, a 429 or a throttling code (503 SlowDown), or one of the
transient codes; each after rand(0, 1) x min(scale x 2^(attempt - 1), 20) s, the scale 1 s
for throttling and 50 ms otherwise. Never after another 4xx. (`x-amz-retry-after` is not
honoured: the endpoint does not decide how long a worker waits.)

Whoever answers for the endpoint is not trusted (docs/security.md). A request has one
deadline, its attempts and the backoffs between them included, from before it waits for a
pooled connection to its answer's last byte: `timeout` plus what it sends and may receive
(a GET's `limit`, else ERROR_BODY_BYTES) at `min_read_bytes_per_second`. Another attempt
starts only with at least half of that time left (its backoff cut short to leave it), and
ends at the same deadline. When it passes the socket is shut (`deadlines.py`), whatever
was blocked on it (a connect, a TLS handshake, a send, a head or chunk-size line or
trailers sent a byte at a time, a body, an answer that said `Connection: close`), and the
request fails (TooSlow), not tried again; a connection that stays silent for `timeout` is
a timeout, tried again if time is left. The endpoint's name is looked up, and each of its
addresses tried, within that deadline (`http_pool.py`, `resolver.py`).

A GET reads at most the caller's `limit` plus one byte before it refuses the object
(TooLarge); an object's answer must announce its length and no answer may be an interim
1xx (Malformed: S3 sends neither); an answer's head (status line and headers) may take
HEAD_BYTES (Malformed past it, read no further); an error's body is read up to
ERROR_BODY_BYTES, and only an S3 error code of plain characters is taken from it."""

from __future__ import annotations

import http.client
import logging
import random
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import BinaryIO

from services.storage.deadlines import WATCHDOG, Deadline
from services.storage.http_pool import ConnectionPool
from services.storage.sigv4 import Signer, canonical_query, quote_path

log = logging.getLogger(__name__)

ATTEMPTS = 4
ERROR_BODY_BYTES = 4096
HEAD_BYTES = 16 << 10
"""The most an answer's head (its status line and headers) may take; S3's take under 2 KiB.
`http.client` alone allows 100 lines of 64 KiB, and holds about twice what it read while it
parses them: some 11 MiB for one answer."""
MAX_BACKOFF_SECONDS = 20.0
_PIECE = 1 << 20
_TRANSIENT_STATUS = frozenset({500, 502, 503, 504})
_TRANSIENT_CODES = frozenset({"RequestTimeout", "RequestTimeoutException",
                              "PriorRequestNotComplete"})
_THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
    "TooManyRequestsException", "ProvisionedThroughputExceededException",
    "TransactionInProgressException", "RequestLimitExceeded", "BandwidthLimitExceeded",
    "LimitExceededException", "RequestThrottled", "SlowDown", "EC2ThrottledException"})
_CODE = re.compile(rb"<Code>([A-Za-z0-9.]{1,64})</Code>")


class Unreachable(Exception):
    """No answer after every attempt: the connection failed, was cut or timed out."""

    def __init__(self, connecting: bool, reason: str) -> None:
        super().__init__(reason)
        self.connecting = connecting
        """Whether the last attempt failed before a connection was made."""
        self.reason = reason
        """The local error's kind, never text the endpoint sent."""


class TooLarge(Exception):
    def __init__(self, size: str) -> None:
        super().__init__(size)
        self.size = size


class TooSlow(Exception):
    """The request's deadline passed: its socket was shut, whatever it was waiting for."""

    def __init__(self, allowed: float, held: int | None) -> None:
        super().__init__(f"{'some' if held is None else held} bytes in {allowed:.1f} s")
        self.allowed = allowed
        self.held = held
        """The body's bytes read by then, when it was the body being read."""


class Malformed(Exception):
    """An answer no S3 store gives (an interim 1xx answer, an object without its
    length): the endpoint is not the store it should be. Not tried again."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class _CannotConnect(Exception):
    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    code: str
    """The S3 error code of an error's body, or its HTTP status when it names none; empty
    for a success."""
    length: int | None
    """The Content-Length it announced."""
    body: bytearray | None = None
    """A successful GET's object."""


class _HeadReader:
    """What `http.client` reads an answer's head through: its lines, HEAD_BYTES of them in
    all at most (Malformed past that), nothing read beyond."""

    __slots__ = ("_left", "_readline")

    def __init__(self, fp: BinaryIO) -> None:
        self._readline = fp.readline
        self._left = HEAD_BYTES

    def readline(self, _limit: int = -1) -> bytes:
        # `http.client` asks for a line of up to 64 KiB + 1: never more than is left here.
        line = self._readline(self._left + 1)
        self._left -= len(line)
        if self._left < 0:
            raise Malformed(f"a head of more than {HEAD_BYTES} bytes")
        return line


class _Response(http.client.HTTPResponse):
    """Bounds the answer's head (HEAD_BYTES), and refuses an interim (1xx) answer, which
    `http.client` would skip over for as long as they come (100) or take as the final answer
    (the others, whose real answer would then be read as the next request's). Cairn sends
    no `Expect`: S3 sends none."""

    def begin(self) -> None:
        fp = self.fp
        self.fp = _HeadReader(fp)  # type: ignore[assignment]
        try:
            super().begin()
        finally:
            self.fp = fp

    def _read_status(self) -> tuple[str, int, str]:
        version, status, reason = super()._read_status()  # type: ignore[misc]
        if 100 <= status < 200:
            raise Malformed(f"an interim answer ({status})")
        return version, status, reason


def backoff(attempt: int, throttled: bool, draw: Callable[[], float] = random.random) -> float:
    """Seconds to wait after attempt number `attempt` (from 1) failed."""
    scale = 1.0 if throttled else 0.05
    return draw() * min(scale * 2.0 ** (attempt - 1), MAX_BACKOFF_SECONDS)


def _content_length(value: str | None) -> int | None:
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__  # http.client's texts quote what the endpoint sent


class S3Requests:
    """Requests for the keys of one bucket (and listings of it), path-style, with an
    unsigned payload. Thread-safe: each request takes a connection of the pool for its
    duration."""

    def __init__(self, pool: ConnectionPool, signer: Signer, bucket: str, *,
                 min_read_bytes_per_second: int,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._pool = pool
        self._signer = signer
        self._bucket = f"{pool.path}/{quote_path(bucket)}"
        self._root = self._bucket + "/"
        self._min_rate = min_read_bytes_per_second
        self._sleep = sleep

    def send(self, method: str, key: str, body: memoryview | None = None, *,
             limit: int | None = None, headers: Mapping[str, str] | None = None) -> Answer:
        """`key`: the object's whole key in the bucket. `limit`: for a GET, the most bytes
        its object can hold (Answer.body then holds it). `headers`: more to send and sign
        (names lower case)."""
        return self._send(method, self._root + quote_path(key), "", headers, body, limit,
                          whole=True)

    def listing(self, params: Iterable[tuple[str, str]], *, limit: int) -> Answer:
        """A GET of the bucket itself with the query `params` (ListObjectsV2's): a 200's
        body, at most `limit` bytes, in Answer.body. Unlike an object's, it may come
        without its length (chunked): S3 streams listings."""
        return self._send("GET", self._bucket, canonical_query(params), None, None, limit,
                          whole=False)

    def _send(self, method: str, path: str, query: str, headers: Mapping[str, str] | None,
              body: memoryview | None, limit: int | None, *, whole: bool) -> Answer:
        """Attempts of the request until one answers for good or its time runs out: one
        deadline for them all, from now (`until`), `allowed` seconds (`_pause`)."""
        shown = f"{path}?{query}" if query else path
        sent = body.nbytes if body is not None else 0
        allowed = self._pool.timeout + (
            sent + (ERROR_BODY_BYTES if limit is None else limit)) / self._min_rate
        until = time.monotonic() + allowed
        for attempt in range(1, ATTEMPTS + 1):
            try:
                answer = self._once(method, path, query, headers, body, limit, whole, until,
                                    allowed)
            except (_CannotConnect, OSError, http.client.HTTPException) as exc:
                cause = exc.cause if isinstance(exc, _CannotConnect) else exc
                log.info("S3 %s %s: attempt %d of %d failed: %r", method, shown, attempt,
                         ATTEMPTS, cause)
                if attempt == ATTEMPTS or not self._pause(
                        backoff(attempt, throttled=False), until, allowed):
                    raise Unreachable(isinstance(exc, _CannotConnect), _reason(cause)) from None
                continue
            throttled = answer.status == 429 or answer.code in _THROTTLING_CODES
            if attempt == ATTEMPTS or not (throttled or answer.status in _TRANSIENT_STATUS
                                           or answer.code in _TRANSIENT_CODES):
                return answer
            log.info("S3 %s %s: attempt %d of %d answered %d %s", method, shown, attempt,
                     ATTEMPTS, answer.status, answer.code)
            if not self._pause(backoff(attempt, throttled), until, allowed):
                return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _pause(self, seconds: float, until: float, allowed: float) -> bool:
        """Waits `seconds` (at most) before another attempt, which must have half the
        request's `allowed` time left before `until`, or is not made (False): an endpoint
        that fails each attempt just before the deadline gets only one."""
        spare = until - time.monotonic() - allowed / 2
        if spare < 0:
            return False
        self._sleep(min(seconds, spare))
        return True

    def _once(self, method: str, path: str, query: str, headers: Mapping[str, str] | None,
              body: memoryview | None, limit: int | None, whole: bool, until: float,
              allowed: float) -> Answer:
        """One attempt, ended at the request's deadline `until` (`time.monotonic`) from
        before it waits for a connection to after its answer's last byte (TooSlow past it,
        not tried again; `allowed`: the request's time in all)."""
        pool = self._pool
        conn = pool.take(until)
        deadline = WATCHDOG.watch(until, conn.sock)
        reusable = False
        try:
            try:
                answer, reusable = self._exchange(conn, deadline, allowed, method, path, query,
                                                  headers, body, limit, whole)
            except (TooSlow, TooLarge, Malformed):
                raise
            except Exception:
                if WATCHDOG.end(deadline):
                    raise TooSlow(allowed, None) from None
                raise
            if WATCHDOG.end(deadline):  # an answer cut short there (an error's body)
                raise TooSlow(allowed, None)
            return answer
        finally:
            fired = WATCHDOG.end(deadline)  # ended on every way out, a refusal's included
            pool.give(conn, reusable=reusable and not fired)

    def _exchange(self, conn: http.client.HTTPConnection, deadline: Deadline, allowed: float,
                  method: str, path: str, query: str, extra: Mapping[str, str] | None,
                  body: memoryview | None, limit: int | None,
                  whole: bool) -> tuple[Answer, bool]:
        """The request sent and its answer read: the answer, and whether the connection
        can serve another request."""
        pool = self._pool
        conn.response_class = _Response
        if conn.sock is None:
            try:
                pool.connect(conn, deadline.at, partial(WATCHDOG.arm, deadline))
            except OSError as exc:
                raise _CannotConnect(exc) from None
            if deadline.fired:
                raise TimeoutError("connected past the deadline")
        headers = self._signer.headers(method, pool.host, path, query, extra)
        if body is not None:
            headers["content-length"] = str(body.nbytes)
        conn.request(method, f"{path}?{query}" if query else path, body=body, headers=headers)
        response = conn.getresponse()
        length = response.length
        if method == "HEAD" or response.status == 204:
            # http.client counts no body for a HEAD: the size is the header's.
            length = _content_length(response.getheader("content-length"))
            response.read()
            code = "" if response.status < 300 else str(response.status)
            answer = Answer(response.status, code, length)
        elif response.status == 200 and limit is not None:
            answer = Answer(200, "", length,
                            self._bounded(response, deadline, allowed, limit, whole))
        else:
            data = response.read(ERROR_BODY_BYTES)
            found = _CODE.search(data) if response.status >= 300 else None
            code = found.group(1).decode() if found else (
                str(response.status) if response.status >= 300 else "")
            answer = Answer(response.status, code, length)
        return answer, response.isclosed() and not response.will_close

    @staticmethod
    def _bounded(response: http.client.HTTPResponse, deadline: Deadline, allowed: float,
                 limit: int, whole: bool) -> bytearray:
        """The body of a GET's answer, at most `limit` bytes, read into one buffer (no
        pieces joined afterwards). `whole`: an object's, whose length S3 always announces
        (Malformed without one)."""
        announced = response.length
        if announced is None and whole:
            raise Malformed("an object's body without its length (Content-Length)")
        if announced is not None and announced > limit:
            raise TooLarge(f"{announced} bytes")
        size = announced if announced is not None else limit + 1
        buffer = bytearray(size)
        held = 0
        with memoryview(buffer) as view:
            while held < size:
                try:
                    if announced is not None:  # straight from the socket into the buffer
                        got = response.fp.readinto1(view[held:held + _PIECE])
                    else:  # chunked, or up to the close
                        piece = response.read1(min(_PIECE, size - held))
                        got = len(piece)
                        view[held:held + got] = piece
                except Exception:
                    if deadline.fired:
                        raise TooSlow(allowed, held) from None
                    raise
                if not got:
                    if deadline.fired:  # the socket was shut
                        raise TooSlow(allowed, held)
                    break
                held += got
        if announced is not None:
            if held < announced:
                raise http.client.IncompleteRead(b"", announced - held)  # cut: tried again
            response.close()  # read to its end, as `read` would have: the connection is free
            return buffer
        if held > limit:
            raise TooLarge(f"more than {limit} bytes")
        del buffer[held:]
        return buffer
