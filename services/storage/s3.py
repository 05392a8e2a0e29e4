"""One S3 bucket (Ceph RGW, AWS or any S3-compatible store) under a key prefix: the driver
of object-storage targets. It moves opaque blobs; what they hold (sealed chunks, manifests,
the wrapped data key) is the business of its callers.

Every request that reads an answer's body (PUT, conditional PUT, GET, HEAD and DELETE of
one key, ListObjectsV2) goes through Cairn's own signed requests on pooled keep-alive
connections (`s3_requests.py`), each answer bounded in size and time, the bucket's check
included (a listing of one key, which asks for the permission a HeadBucket does). No
proxies or CA bundle are taken from the environment.

Errors come out as Cairn's: unreachable or refusing credentials is StorageUnavailable (the
job can be retried later), anything else the store rejects is StorageError with the S3
error code in the operator's log. A missing key is None from `get`/`size`, not an error.

Whoever holds the bucket or the endpoint can answer a read with anything, of any size, at
any pace: every read names the most its object can legitimately be, and a longer answer is
refused (DataCorrupt, naming the object) without the rest of it being read, as is a
listing's page longer than `page_limit` (StorageError); and every
request, from its connection to its answer's last byte and its retries included, must end
within `timeout_seconds` plus what it sends and may receive at `min_read_bytes_per_second`,
or its connection is shut and it fails (StorageUnavailable)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections import deque
from collections.abc import Iterator

from typing_extensions import Buffer

from services.errors import DataCorrupt, StorageError, StorageUnavailable
from services.settings import S3Settings
from services.storage import s3_listing
from services.storage.chunk_backend import StoredObject
from services.storage.http_pool import ConnectionPool, PoolBusy
from services.storage.s3_listing import NotAListing, Page
from services.storage.s3_requests import (
    Answer,
    Malformed,
    S3Requests,
    TooLarge,
    TooSlow,
    Unreachable,
)
from services.storage.sigv4 import Signer

log = logging.getLogger(__name__)

_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}
_REFUSED = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoSuchBucket"}
_EXISTS = {"412", "PreconditionFailed", "409", "ConditionalRequestConflict"}
"""A conditional write (If-None-Match: *) found the object there, or (AWS) lost to a
concurrent write of the same key."""
_NO_CONDITIONS = {"501", "NotImplemented", "400", "InvalidArgument", "InvalidRequest"}
"""How stores that do not take a conditional write refuse one."""


LIST_PAGE_KEYS = 1000
"""Keys a listing's page asks for (S3's most)."""

LIST_PAGES_MARGIN = 100
"""Pages a bounded listing (`list(most=...)`) may ask for beyond the `most // LIST_PAGE_KEYS`
its keys fill: room for names Cairn never writes (about 100,000 of them), and the most
pages without keys an endpoint can make it ask for."""

LIST_TOKENS_KEPT = 1024
"""The continuation tokens a listing remembers (by digest), to refuse one given again: the
last ones only, so that what a listing holds does not grow with its pages. A longer cycle
is ended by the listing's deadline, or a bounded listing's page cap."""


def page_limit(keys: int) -> int:
    """The most bytes a listing's page of `keys` keys may take: 2 KiB a key (a Cairn key's
    entry takes about 400 bytes), 8 KiB besides; a full page's, about 2 MiB."""
    return (8 << 10) + keys * (2 << 10)


def _plain(code: str) -> str:
    """An error code fit for a message: an S3 code is letters and digits; anything else
    the endpoint put there stays in the operator's log."""
    return code if code.isascii() and code.replace(".", "").isalnum() and len(code) <= 64 \
        else "error"


class Bucket:
    """A `ChunkBackend` (`chunk_backend.py`). Thread-safe: a worker shares one per target
    between its uploads, and its connection pool (`connections`) is their in-flight
    limit."""

    where = "bucket and prefix"

    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        self._credentials = settings.credentials()
        self._pool = ConnectionPool(settings.endpoint, settings.connections,
                                    settings.timeout_seconds)
        # UNSIGNED-PAYLOAD, and no Content-MD5: hashing every body costs 0.9 and 1.45 CPU-s
        # per GiB here. What Cairn stores carries its own AEAD tag, checked on every read,
        # and TLS guards it in transit where it is used.
        self._requests = S3Requests(
            self._pool, Signer(self._credentials.access_key,
                               self._credentials.secret_key.get_secret_value(),
                               settings.region),
            settings.bucket, min_read_bytes_per_second=settings.min_read_bytes_per_second)

    def _key(self, key: str) -> str:
        return f"{self.settings.prefix}/{key}"

    def _refused(self, what: str, code: str) -> StorageUnavailable:
        return StorageUnavailable(
            f"the S3 store refused {what} in bucket {self.settings.bucket!r} "
            f"({code}): check the target's credentials and bucket")

    def _answer_fails(self, what: str, answer: Answer) -> Exception:
        if answer.code in _REFUSED:
            return self._refused(what, answer.code)
        log.warning("S3 %s failed: HTTP %d %s", what, answer.status, answer.code)
        return StorageError(f"the S3 store failed {what} ({_plain(answer.code)})")

    def _send(self, what: str, method: str, key: str, body: memoryview | None = None,
              limit: int | None = None, *, headers: dict[str, str] | None = None,
              slow: str | None = None) -> Answer:
        """`slow`: what the store did not do in time, for the message (`complete <what>`
        unless given)."""
        with self._mapped(what, slow):
            return self._requests.send(method, self._key(key), body, limit=limit,
                                       headers=headers)

    @contextlib.contextmanager
    def _mapped(self, what: str, slow: str | None = None) -> Iterator[None]:
        """The data plane's failures as Cairn's errors; TooLarge is the caller's."""
        try:
            yield
        except Unreachable as exc:
            if exc.connecting:
                raise StorageUnavailable(
                    f"cannot reach the S3 endpoint {self.settings.endpoint}") from None
            log.warning("S3 %s failed: %s", what, exc.reason)
            raise StorageUnavailable(
                f"the S3 store did not complete {what}: {exc.reason}") from None
        except TooSlow as exc:
            raise self._too_slow(slow or f"complete {what}", exc.allowed, exc.held) from None
        except PoolBusy:
            raise StorageUnavailable(
                f"no connection to the S3 endpoint came free for {what} in time: all "
                f"{self.settings.connections} of this worker's were held") from None
        except Malformed as exc:
            log.warning("S3 %s in bucket %s answered with %s", what, self.settings.bucket,
                        exc.what)
            raise StorageError(
                f"the S3 store answered {what} with {exc.what}, which S3 never sends: the "
                "endpoint is not the S3 store it should be") from None

    def put(self, key: str, data: Buffer) -> None:
        answer = self._send(f"writing {key}", "PUT", key, memoryview(data))
        if answer.status != 200:
            raise self._answer_fails(f"writing {key}", answer)

    def put_new(self, key: str, data: bytes) -> bool:
        """Writes the object only if there is none under `key` (`If-None-Match: *`, checked
        by the store atomically); False when one is there already, written by whoever came
        first. Its answer is read up to ERROR_BODY_BYTES, within the request's deadline."""
        what = f"writing {key}"
        answer = self._send(what, "PUT", key, memoryview(data),
                            headers={"if-none-match": "*"})
        if answer.status == 200:
            return True
        if answer.code in _EXISTS:
            return False
        if answer.code in _NO_CONDITIONS:
            log.warning("S3 conditional write of %s refused: HTTP %d %s", key, answer.status,
                        answer.code)
            raise StorageError(
                f"the S3 store refused to write {key} only if it is not there yet "
                f"(If-None-Match: *, answered {_plain(answer.code)}): Cairn makes an object "
                "target's data key with that condition, so the store must take it (Ceph RGW, "
                'AWS S3 and MinIO do; docs/operations.md, "Object targets: the data key")')
        raise self._answer_fails(what, answer)

    def get(self, key: str, *, limit: int) -> bytearray | None:
        """The object, None when there is no such object. `limit`: the most bytes it can
        legitimately hold; a longer one is refused with DataCorrupt as soon as its length
        (announced, or read so far) passes it, and the rest is never read."""
        try:
            answer = self._send(f"reading {key}", "GET", key, limit=limit, slow=f"send {key}")
        except TooLarge as exc:
            raise self._too_large(key, exc.size, limit) from None
        if answer.body is not None:
            return answer.body
        if answer.code in _NOT_FOUND:
            return None
        raise self._answer_fails(f"reading {key}", answer)

    def _too_slow(self, doing: str, allowed: float, held: int | None) -> StorageUnavailable:
        log.warning("S3 store in bucket %s (prefix %s) did not %s within %.1f s (%s bytes "
                    "of its body); abandoned", self.settings.bucket, self.settings.prefix,
                    doing, allowed, "some" if held is None else held)
        return StorageUnavailable(
            f"the S3 store did not {doing} within {allowed:.0f} s (slower than "
            f"{self.settings.min_read_bytes_per_second} bytes/s): the request was "
            "abandoned. A store that slow, or an endpoint that trickles its answers, fails "
            "the job")

    def _too_large(self, key: str, size: str, limit: int) -> DataCorrupt:
        log.warning("S3 object %s/%s in bucket %s answered with %s; at most %d expected",
                    self.settings.prefix, key, self.settings.bucket, size, limit)
        return DataCorrupt(f"the object {key} of the S3 store is {size}, more than the "
                           f"{limit} it can legitimately hold: it was replaced or appended "
                           "to outside Cairn, or the endpoint is not the S3 store it should be")

    def size(self, key: str) -> int | None:
        """The object's size, None when there is no such object."""
        answer = self._send(f"looking up {key}", "HEAD", key)
        if answer.status == 200 and answer.length is not None:
            return answer.length
        if answer.code in _NOT_FOUND:
            return None
        raise self._answer_fails(f"looking up {key}", answer)

    def delete(self, key: str) -> None:
        """Removes the object; one already gone is no error (S3 deletes are idempotent)."""
        answer = self._send(f"deleting {key}", "DELETE", key)
        if answer.status not in (200, 204) and answer.code not in _NOT_FOUND:
            raise self._answer_fails(f"deleting {key}", answer)

    def holds_any(self, prefix: str) -> bool:
        """Whether any object lies under `<target prefix>/<prefix>` (one listing of one key)."""
        return bool(next(self._pages(prefix, 1)).objects)

    def list(self, prefix: str = "", *, deadline: float, most: int | None = None
             ) -> Iterator[StoredObject]:
        """Every object under `<target prefix>/<prefix>`, in key order, paged, refused
        (StorageError) once it asks for a page past `deadline` (monotonic) or, given `most`,
        for more than `most // LIST_PAGE_KEYS + LIST_PAGES_MARGIN` pages; but one
        whose key holds a control character (or another character that does not print),
        which Cairn never writes and whoever can write the bucket can: logged, escaped,
        and left out, so that such a name reaches neither Cairn's logs nor its callers and
        stops no listing (`holds_any` still counts it)."""
        strip = len(self.settings.prefix) + 1
        pages = None if most is None else most // LIST_PAGE_KEYS + LIST_PAGES_MARGIN
        for page in self._pages(prefix, LIST_PAGE_KEYS, deadline, pages):
            for stored in page.objects:
                if not stored.key.isprintable():
                    log.warning("S3 bucket %s holds %r, which is not a name Cairn writes: "
                                "left out of its listings, left alone", self.settings.bucket,
                                stored.key)
                    continue
                yield StoredObject(stored.key[strip:], stored.size, stored.modified)

    def _pages(self, prefix: str, keys: int, deadline: float | None = None,
               pages: int | None = None) -> Iterator[Page]:
        """ListObjectsV2's pages of at most `keys` keys under `prefix`, each answer read up
        to `page_limit(keys)` bytes (a longer one is refused unread) within the request's
        deadline, and parsed with every DTD refused (`s3_listing.py`); no page is asked for
        after `deadline` (monotonic), nor more than `pages` of them: pages without keys,
        each with a new token, could otherwise come for ever. (`holds_any` alone gives no
        deadline: it asks for one page.)"""
        what = f"listing {prefix or 'the target'}"
        asked = self._key(prefix)
        limit = page_limit(keys)
        token: str | None = None
        # S3 lists each key once, in strictly increasing order, and never gives a
        # continuation token twice: an answer that does otherwise (tokens that cycle A, B,
        # A..., keys repeated or going back) is not the store's, and could page for ever.
        # The tokens are remembered by digest (one may be as long as its page), the last
        # LIST_TOKENS_KEPT only: a longer cycle ends at the deadline or the page cap.
        recent: deque[bytes] = deque()
        tokens: set[bytes] = set()
        last = ""
        asked_for = 0
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise self._not_a_listing(what, "pages past the listing's deadline")
            if pages is not None and asked_for >= pages:
                raise self._not_a_listing(
                    what, f"more than the {pages} pages Cairn can have written there")
            asked_for += 1
            params = [("list-type", "2"), ("prefix", asked), ("max-keys", str(keys)),
                      ("encoding-type", "url")]
            if token is not None:
                params.append(("continuation-token", token))
            with self._mapped(what):
                try:
                    answer = self._requests.listing(params, limit=limit)
                except TooLarge as exc:
                    raise self._not_a_listing(what, f"{exc.size}, more than {limit}") from None
            if answer.body is None:
                raise self._answer_fails(what, answer)
            try:
                page = s3_listing.parse(answer.body, asked)
            except NotAListing as exc:
                raise self._not_a_listing(what, str(exc)) from None
            for stored in page.objects:
                if stored.key <= last:
                    raise self._not_a_listing(
                        what, f"the key {stored.key!r} after {last!r} (not in key order, "
                        "or twice)")
                last = stored.key
            yield page
            if page.next_token is None:
                return
            seen = hashlib.blake2b(page.next_token.encode(), digest_size=16).digest()
            if seen in tokens:
                raise self._not_a_listing(what, "a continuation token given before")
            if len(recent) == LIST_TOKENS_KEPT:
                tokens.discard(recent.popleft())
            recent.append(seen)
            tokens.add(seen)
            token = page.next_token

    def _not_a_listing(self, what: str, why: str) -> StorageError:
        log.warning("S3 %s in bucket %s answered with %s", what, self.settings.bucket, why)
        return StorageError(
            f"the S3 store answered {what} with something that is not a listing Cairn takes "
            "(see the worker's log): the endpoint is not the S3 store it should be")

    def check(self) -> None:
        """Raises Cairn's error unless the bucket answers to these credentials: a listing
        of one key under the target's prefix (ListBucket, the permission a HeadBucket asks
        for), bounded as every other request."""
        self.holds_any("")

    def close(self) -> None:
        self._pool.close()
