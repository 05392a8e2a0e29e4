"""One page of a ListObjectsV2 answer (`s3.Bucket.list`), parsed from bytes already bounded
in size (`s3_requests.S3Requests.listing`) by expat with every DTD refused: a DOCTYPE stops
the parse where it starts, so no entity is ever declared, let alone expanded or fetched
(the defusedxml checks that matter here, without the package). Only what a listing of
Cairn's keys needs is taken: each object's key, size and time of last write, and whether
another page follows. Anything else about the answer (not a listing, a key outside the
prefix asked for, a size or time that is not one) is NotAListing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NoReturn
from urllib.parse import unquote_plus
from xml.parsers import expat

from services.storage.chunk_backend import StoredObject

_ROOT = "ListBucketResult"
_TAKEN = frozenset({"Key", "Size", "LastModified", "IsTruncated", "NextContinuationToken",
                    "EncodingType"})


class NotAListing(Exception):
    """Why the answer is not a listing Cairn takes (for the operator's log)."""


@dataclass(frozen=True)
class Page:
    objects: list[StoredObject]
    """Keys whole, as in the bucket (the caller strips its prefix)."""
    next_token: str | None
    """The continuation token of the next page; None on the last page."""


def _refuse(what: str) -> NoReturn:
    raise NotAListing(what)


def _doctype(*_args: object) -> NoReturn:
    _refuse("a document type declaration (DTD)")


def _entity(*_args: object) -> NoReturn:
    _refuse("an entity declaration")


def parse(body: bytes | bytearray, prefix: str) -> Page:
    """The page in `body`, whose keys must all start with `prefix` (the one asked for)."""
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _doctype
    parser.EntityDeclHandler = _entity
    parser.UnparsedEntityDeclHandler = _entity
    parser.ExternalEntityRefHandler = _entity
    path: list[str] = []
    text: list[str] = []
    fields: dict[str, str] = {}
    contents: list[dict[str, str]] = []

    def start(name: str, _attributes: dict[str, str]) -> None:
        if not path and name != _ROOT:
            _refuse(f"a document of {name[:64]!r}")
        path.append(name)
        text.clear()
        if path == [_ROOT, "Contents"]:
            contents.append({})

    def end(name: str) -> None:
        if name in _TAKEN and len(path) in (2, 3):
            if len(path) == 2:
                fields[name] = "".join(text)
            elif path[1] == "Contents":
                contents[-1][name] = "".join(text)
        path.pop()
        text.clear()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text.append
    try:
        parser.Parse(bytes(body), True)
    except expat.ExpatError as exc:
        raise NotAListing(f"not well-formed XML ({expat.ErrorString(exc.code)})") from None
    # Asked for with encoding-type=url (as botocore asks), so that no key can make the
    # document ill-formed; a store that ignores it says so by leaving EncodingType out.
    decode: Callable[[str], str] = unquote_plus if fields.get("EncodingType") == "url" \
        else str
    objects = [_stored(item, decode, prefix) for item in contents]
    truncated = fields.get("IsTruncated", "false")
    if truncated not in ("true", "false"):
        _refuse(f"IsTruncated {truncated[:16]!r}")
    token = fields.get("NextContinuationToken") or None
    if truncated == "true" and token is None:
        _refuse("a truncated page without a continuation token")
    return Page(objects, token if truncated == "true" else None)


def _stored(item: dict[str, str], decode: Callable[[str], str], prefix: str) -> StoredObject:
    key = item.get("Key")
    size = item.get("Size", "")
    if key is None:
        _refuse("an object without its key")
    key = decode(key)
    if not key.startswith(prefix):
        _refuse("a key outside the prefix asked for")
    if not (size.isascii() and size.isdigit()):
        _refuse(f"the size {size[:32]!r}")
    try:
        modified = datetime.fromisoformat(item.get("LastModified", ""))
    except ValueError:
        _refuse("a time of last write that is not one")
    if modified.tzinfo is None:
        modified = modified.replace(tzinfo=UTC)
    return StoredObject(key, int(size), modified)
