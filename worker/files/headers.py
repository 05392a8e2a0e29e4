"""The HTTP headers of a file download: which bytes a `Range` asks for (RFC 9110, 14.2),
the `Content-Disposition` that names the file (RFC 6266, with RFC 8187's `filename*` for
names that are not plain ASCII) and the `ETag` that says which version of it this is.

One range only: a multi-range request (multipart/byteranges) is answered with the whole
file, as RFC 9110 lets a server do; so is a `Range` that is not valid `bytes=` syntax, or
one sent with an `If-Range` that names another version."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from urllib.parse import quote

_RANGE = re.compile(r"^bytes=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)
_RFC8187_SAFE = "!#$&+-.^_`|~"
"""attr-char's punctuation (RFC 8187, 3.2.1): what `filename*` may hold unencoded."""


@dataclass(frozen=True)
class ByteRange:
    """Bytes [start, end) of a file of `size` bytes."""

    start: int
    end: int
    size: int

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def content_range(self) -> str:
        return f"bytes {self.start}-{self.end - 1}/{self.size}"


class RangeNotSatisfiable(Exception):
    """The one range asked for lies wholly past the file's end (416)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"the range asked for lies outside the file's {size} bytes")
        self.size = size

    @property
    def content_range(self) -> str:
        return f"bytes */{self.size}"


def byte_range(header: str | None, size: int, *, if_range: str | None = None,
               etag: str | None = None) -> ByteRange | None:
    """The range a `Range` header asks of a file of `size` bytes; None for the whole file
    (no header, a syntax or unit this does not serve, several ranges, or an `If-Range`
    other than `etag`). RangeNotSatisfiable when the range starts past the end, or is an
    empty suffix (`bytes=-0`)."""
    if header is None:
        return None
    if if_range is not None and (etag is None or if_range.strip() != etag):
        return None  # a date, or another version's tag: the whole (current) file
    found = _RANGE.match(header.strip())
    if found is None:
        return None
    first, last = found.group(1), found.group(2)
    if not first and not last:
        return None
    if not first:  # bytes=-N: the last N bytes
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiable(size)
        return ByteRange(max(0, size - suffix), size, size)
    start = int(first)
    if last and int(last) < start:
        return None  # invalid: ignored, as RFC 9110 says
    if start >= size:
        raise RangeNotSatisfiable(size)
    end = size if not last else min(int(last) + 1, size)
    return ByteRange(start, end, size)


def content_disposition(name: str) -> str:
    """`attachment` with the file's name: an ASCII stand-in in `filename` for old clients
    and the exact name, UTF-8 and percent-encoded, in `filename*` (RFC 6266, 4.3). A name
    that holds no character a browser could save under is `download`."""
    if not name or name in (".", ".."):
        name = "download"
    fallback = "".join(c if 0x20 <= ord(c) < 0x7F and c not in '"\\%/' else "_" for c in name)
    exact = quote(name.encode("utf-8", "surrogateescape"), safe=_RFC8187_SAFE)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{exact}"


def entity_tag(restore_point_id: str, partition: int | None, path: str, size: int,
               mtime: str | None) -> str:
    """A strong ETag of one file in one restore point: a restore point never changes, so
    its id, the file's place and its size and mtime name the bytes."""
    key = "\0".join([restore_point_id, "" if partition is None else str(partition), path,
                     str(size), mtime or ""])
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()
    return f'"{digest[:32]}"'
