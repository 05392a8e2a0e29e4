"""One S3 bucket (Ceph RGW, AWS or any S3-compatible store) under a key prefix: the driver
of object-storage targets. It moves opaque blobs; what they hold (sealed chunks, manifests,
the wrapped data key) is the business of its callers.

Errors come out as Cairn's: unreachable or refusing credentials is StorageUnavailable (the
job can be retried later), anything else the store rejects is StorageError with the S3
error code in the operator's log. A missing key is None from `get`/`size`, not an error.

Whoever holds the bucket or the endpoint can answer a read with anything, of any size, at
any pace: every read names the most its object can legitimately be, and a longer answer is
refused (DataCorrupt, naming the object) without the rest of it being read; and its body
must arrive within `timeout_seconds` plus that size at `min_read_bytes_per_second`, or the
connection is shut and the read fails (StorageUnavailable)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from services.errors import DataCorrupt, StorageError, StorageUnavailable
from services.settings import S3Settings
from services.storage.chunk_backend import StoredObject

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger(__name__)

_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}
_REFUSED = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoSuchBucket"}
_EXISTS = {"412", "PreconditionFailed", "409", "ConditionalRequestConflict"}
"""A conditional write (If-None-Match: *) found the object there, or (AWS) lost to a
concurrent write of the same key."""
_NO_CONDITIONS = {"501", "NotImplemented", "400", "InvalidArgument", "InvalidRequest"}
"""How stores that do not take a conditional write refuse one."""
_READ_PIECE = 1 << 20


def _shut(body: object, late: threading.Event) -> None:
    """Ends a read of `body` blocked past its deadline (urllib3's response `shutdown`)."""
    late.set()
    raw = getattr(body, "_raw_stream", None)
    try:
        raw.shutdown()  # type: ignore[union-attr]
    except Exception:  # already given back, or finished meanwhile: nothing is blocked
        log.debug("S3 body already released when its deadline passed", exc_info=True)


class Bucket:
    """A `ChunkBackend` (`chunk_backend.py`). Thread-safe: boto3's clients are, and a worker
    shares one per target between its uploads (the connection pool is the in-flight
    limit)."""

    where = "bucket and prefix"

    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        credentials = settings.credentials()
        self._client: S3Client = boto3.session.Session().client(
            "s3", endpoint_url=settings.endpoint, region_name=settings.region,
            aws_access_key_id=credentials.access_key,
            aws_secret_access_key=credentials.secret_key.get_secret_value(),
            config=Config(
                max_pool_connections=settings.connections,
                connect_timeout=settings.timeout_seconds,
                read_timeout=settings.timeout_seconds,
                retries={"mode": "standard", "total_max_attempts": 4},
                # UNSIGNED-PAYLOAD: botocore would otherwise SHA-256 every body it sends
                # (0.9 CPU-s per GiB here). What Cairn stores carries its own AEAD tag,
                # checked on every read, and TLS guards it in transit where it is used.
                s3={"addressing_style": "path", "payload_signing_enabled": False},
                # Newer SDKs add streaming CRC trailers that many S3 stores (RGW before
                # Reef among them) refuse.
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ))

    def _key(self, key: str) -> str:
        return f"{self.settings.prefix}/{key}"

    def _fail(self, what: str, exc: Exception) -> Exception:
        if isinstance(exc, ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _REFUSED:
                return StorageUnavailable(
                    f"the S3 store refused {what} in bucket {self.settings.bucket!r} "
                    f"({code}): check the target's credentials and bucket")
            log.warning("S3 %s failed: %s", what, exc)
            return StorageError(f"the S3 store failed {what} ({code or 'error'})")
        if isinstance(exc, EndpointConnectionError):
            return StorageUnavailable(f"cannot reach the S3 endpoint {self.settings.endpoint}")
        log.warning("S3 %s failed: %s", what, exc)
        return StorageUnavailable(f"the S3 store did not complete {what}: {exc}")

    def put(self, key: str, data: bytes) -> None:
        # No Content-MD5 either (1.45 CPU-s per GiB here): the AEAD tag is the check.
        try:
            self._client.put_object(Bucket=self.settings.bucket, Key=self._key(key), Body=data)
        except (ClientError, BotoCoreError) as exc:
            raise self._fail(f"writing {key}", exc) from None

    def _missing_or_fail(self, what: str, exc: Exception) -> None:
        """Returns for "no such object"; raises Cairn's error for anything else."""
        if isinstance(exc, ClientError) \
                and str(exc.response.get("Error", {}).get("Code", "")) in _NOT_FOUND:
            return
        raise self._fail(what, exc) from None

    def put_new(self, key: str, data: bytes) -> bool:
        """Writes the object only if there is none under `key` (`If-None-Match: *`, checked
        by the store atomically); False when one is there already, written by whoever came
        first."""
        try:
            self._client.put_object(Bucket=self.settings.bucket, Key=self._key(key), Body=data,
                                    IfNoneMatch="*")
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _EXISTS:
                return False
            if code in _NO_CONDITIONS:
                log.warning("S3 conditional write of %s refused: %s", key, exc)
                raise StorageError(
                    f"the S3 store refused to write {key} only if it is not there yet "
                    f"(If-None-Match: *, answered {code}): Cairn makes an object target's data "
                    "key with that condition, so the store must take it (Ceph RGW, AWS S3 and "
                    'MinIO do; docs/operations.md, "Object targets: the data key")') from None
            raise self._fail(f"writing {key}", exc) from None
        except BotoCoreError as exc:
            raise self._fail(f"writing {key}", exc) from None
        return True

    def get(self, key: str, *, limit: int) -> bytes | None:
        """The object, None when there is no such object. `limit`: the most bytes it can
        legitimately hold; a longer one is refused with DataCorrupt as soon as its length
        (announced, or read so far) passes it, and the rest is never read."""
        try:
            answer = self._client.get_object(Bucket=self.settings.bucket, Key=self._key(key))
        except (ClientError, BotoCoreError) as exc:
            self._missing_or_fail(f"reading {key}", exc)
            return None
        body = answer["Body"]
        allowed = self.settings.timeout_seconds + limit / self.settings.min_read_bytes_per_second
        # Every socket read has its timeout, but a body trickled a byte at a time passes
        # each one: past the deadline the socket is shut from this timer's thread, which
        # ends the read blocked on it. (botocore's body gives no other handle on it.)
        late = threading.Event()
        watchdog = threading.Timer(allowed, _shut, (body, late))
        watchdog.daemon = True
        watchdog.start()
        try:
            announced = answer.get("ContentLength")
            if announced is not None and announced > limit:
                raise self._too_large(key, f"{announced} bytes", limit)
            pieces: list[bytes] = []
            held = 0
            while piece := body.read(min(_READ_PIECE, limit + 1 - held)):
                pieces.append(piece)
                held += len(piece)
                if held > limit:
                    raise self._too_large(key, f"more than {limit} bytes", limit)
            if late.is_set():
                raise self._too_slow(key, allowed, held)
        except BaseException as exc:
            # The connection goes, with whatever was not read: nothing more is buffered.
            # (A body read to its end has given its connection back to the pool already.)
            watchdog.cancel()
            body.close()
            if late.is_set() and not isinstance(exc, DataCorrupt | StorageUnavailable):
                raise self._too_slow(key, allowed, None) from None
            if isinstance(exc, ClientError | BotoCoreError):
                raise self._fail(f"reading {key}", exc) from None
            raise
        watchdog.cancel()
        return b"".join(pieces)

    def _too_slow(self, key: str, allowed: float, held: int | None) -> StorageUnavailable:
        log.warning("S3 object %s/%s in bucket %s not read within %.0f s (%s bytes); "
                    "abandoned", self.settings.prefix, key, self.settings.bucket, allowed,
                    "some" if held is None else held)
        return StorageUnavailable(
            f"the S3 store did not send {key} within {allowed:.0f} s (slower than "
            f"{self.settings.min_read_bytes_per_second} bytes/s): the read was abandoned. "
            "A store that slow, or an endpoint that trickles its answers, fails the job")

    def _too_large(self, key: str, size: str, limit: int) -> DataCorrupt:
        log.warning("S3 object %s/%s in bucket %s answered with %s; at most %d expected",
                    self.settings.prefix, key, self.settings.bucket, size, limit)
        return DataCorrupt(f"the object {key} of the S3 store is {size}, more than the "
                           f"{limit} it can legitimately hold: it was replaced or appended "
                           "to outside Cairn, or the endpoint is not the S3 store it should be")

    def size(self, key: str) -> int | None:
        """The object's size, None when there is no such object."""
        try:
            return self._client.head_object(Bucket=self.settings.bucket,
                                            Key=self._key(key))["ContentLength"]
        except (ClientError, BotoCoreError) as exc:
            self._missing_or_fail(f"looking up {key}", exc)
            return None

    def delete(self, key: str) -> None:
        """Removes the object; one already gone is no error (S3 deletes are idempotent)."""
        try:
            self._client.delete_object(Bucket=self.settings.bucket, Key=self._key(key))
        except (ClientError, BotoCoreError) as exc:
            raise self._fail(f"deleting {key}", exc) from None

    def holds_any(self, prefix: str) -> bool:
        """Whether any object lies under `<target prefix>/<prefix>` (one listing of one key)."""
        try:
            answer = self._client.list_objects_v2(Bucket=self.settings.bucket,
                                                  Prefix=self._key(prefix), MaxKeys=1)
        except (ClientError, BotoCoreError) as exc:
            raise self._fail(f"listing {prefix}", exc) from None
        return bool(answer.get("Contents"))

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        """Every object under `<target prefix>/<prefix>`, in key order, paged."""
        strip = len(self.settings.prefix) + 1
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.settings.bucket, Prefix=self._key(prefix))
            for page in pages:
                for item in page.get("Contents", []):
                    yield StoredObject(item["Key"][strip:], item["Size"],
                                       item["LastModified"])
        except (ClientError, BotoCoreError) as exc:
            raise self._fail(f"listing {prefix or 'the target'}", exc) from None

    def check(self) -> None:
        """Raises Cairn's error unless the bucket answers to these credentials."""
        try:
            self._client.head_bucket(Bucket=self.settings.bucket)
        except (ClientError, BotoCoreError) as exc:
            raise self._fail("a check of the bucket", exc) from None

    def close(self) -> None:
        self._client.close()
