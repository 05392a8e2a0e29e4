"""AWS Signature Version 4 for S3 requests, as botocore's S3SigV4Auth signs them with an
unsigned payload (`UNSIGNED-PAYLOAD`): the headers a data-plane request needs, built with
one SHA-256 of a short canonical request and one HMAC. The key derived for a day (four
HMACs) is kept until the date changes.

Paths are signed as they are sent, already percent-encoded (`quote_path`): S3 signs the
path without normalising it, so `a/../b` and `a//b` are keys of their own."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping
from urllib.parse import quote

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_ALGORITHM = "AWS4-HMAC-SHA256"


def quote_path(path: str) -> str:
    """`path` as S3 takes it in a URL and signs it: every byte but unreserved ones and `/`
    percent-encoded (botocore's `quote(key, safe="/~")`)."""
    return quote(path, safe="/~")


def canonical_query(params: Iterable[tuple[str, str]]) -> str:
    """A query string in SigV4's canonical form, sent as it is signed: names and values
    percent-encoded (only unreserved characters kept), sorted by name then value."""
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
                    for k, v in sorted(params))


class Signer:
    """Signs requests for one access key in one region. Thread-safe."""

    def __init__(self, access_key: str, secret_key: str, region: str,
                 service: str = "s3") -> None:
        self._access_key = access_key
        self._secret = ("AWS4" + secret_key).encode()
        self._region = region
        self._service = service
        self._day = ("", b"")

    def _key_of(self, day: str) -> bytes:
        cached_day, key = self._day
        if cached_day == day:
            return key
        key = self._secret
        for part in (day, self._region, self._service, "aws4_request"):
            key = hmac.digest(key, part.encode(), "sha256")
        self._day = (day, key)  # one tuple: threads see the old day's or this one
        return key

    def headers(self, method: str, host: str, path: str, query: str = "",
                extra: Mapping[str, str] | None = None, *,
                payload: str = UNSIGNED_PAYLOAD, now: float | None = None) -> dict[str, str]:
        """The headers to send with the request, signed: `host` as the Host header gives
        it (with a port that is not the scheme's), `path` and `query` as sent (`quote_path`,
        `canonical_query`). `extra`: more headers to send and sign (names lower case, values
        as sent). `now`: the signing time (seconds since the epoch), the clock's if None."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        day = stamp[:8]
        signed = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
        if extra:
            signed.update(extra)
        names = sorted(signed)
        signed_names = ";".join(names)
        canonical = "\n".join((
            method, path, query,
            "".join(f"{name}:{' '.join(signed[name].split())}\n" for name in names),
            signed_names, payload))
        scope = f"{day}/{self._region}/{self._service}/aws4_request"
        to_sign = "\n".join((_ALGORITHM, stamp, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()))
        signature = hmac.new(self._key_of(day), to_sign.encode(), "sha256").hexdigest()
        signed["authorization"] = (
            f"{_ALGORITHM} Credential={self._access_key}/{scope}, "
            f"SignedHeaders={signed_names}, Signature={signature}")
        return signed
