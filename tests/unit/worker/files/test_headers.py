"""A download's Range, Content-Disposition and ETag, as clients and browsers read them."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest

from worker.files.headers import (
    ByteRange,
    RangeNotSatisfiable,
    byte_range,
    content_disposition,
    entity_tag,
)


@pytest.mark.parametrize(("header", "expected"), [
    ("bytes=0-99", (0, 100)),
    ("bytes=10-10", (10, 11)),
    ("bytes=900-5000", (900, 1000)),    # the end clipped to the file's
    ("bytes=990-", (990, 1000)),        # open: to the end
    ("bytes=-10", (990, 1000)),         # suffix: the last ten bytes
    ("bytes=-5000", (0, 1000)),         # a suffix longer than the file: all of it
    ("BYTES=5-9", (5, 10)),     # the unit is case-insensitive
])
def test_one_range_is_the_bytes_it_names(header: str, expected: tuple[int, int]) -> None:
    found = byte_range(header, 1000)
    assert found is not None
    assert (found.start, found.end) == expected
    assert found.content_range == f"bytes {expected[0]}-{expected[1] - 1}/1000"


@pytest.mark.parametrize("header", [
    None, "", "bytes=", "bytes=-", "items=0-9", "bytes=9-5", "bytes=0-9,20-29",
    "bytes=a-b", "bytes 0-9"])
def test_what_is_not_one_valid_range_is_the_whole_file(header: str | None) -> None:
    assert byte_range(header, 1000) is None


@pytest.mark.parametrize(("header", "size"), [
    ("bytes=1000-", 1000), ("bytes=1000-2000", 1000), ("bytes=-0", 1000), ("bytes=0-", 0),
    ("bytes=-1", 0)])
def test_a_range_past_the_end_is_not_satisfiable(header: str, size: int) -> None:
    with pytest.raises(RangeNotSatisfiable) as raised:
        byte_range(header, size)
    assert raised.value.content_range == f"bytes */{size}"


def test_if_range_of_another_version_gets_the_whole_file() -> None:
    tag = entity_tag("rp", None, "/a", 1000, None)
    assert byte_range("bytes=0-9", 1000, if_range=tag, etag=tag) == ByteRange(0, 10, 1000)
    assert byte_range("bytes=0-9", 1000, if_range='"other"', etag=tag) is None
    assert byte_range("bytes=0-9", 1000, if_range="Wed, 21 Oct 2015 07:28:00 GMT",
                      etag=tag) is None


def _filename(header: str) -> tuple[str, str]:
    """(filename, filename*) as a browser reads them: RFC 6266's grammar, RFC 8187's
    encoding (attr-chars and %XX of UTF-8 only)."""
    found = re.fullmatch(r'attachment; filename="([^"\\]*)"; '
                         r"filename\*=UTF-8''((?:[A-Za-z0-9!#$&+.^_`|~-]|%[0-9A-F]{2})+)",
                         header)
    assert found is not None, header
    return found.group(1), unquote(found.group(2), errors="strict")


@pytest.mark.parametrize("name", [
    "nginx.conf", "Übersicht 2026.pdf", "日本語.txt", 'quote"and\\back', "semi;colon,=x",
    "new\nline", "100% sure", "emoji 🎉.png"])
def test_content_disposition_carries_the_exact_name(name: str) -> None:
    header = content_disposition(name)
    assert "\n" not in header
    assert "\r" not in header
    plain, exact = _filename(header)
    assert exact == name
    assert plain.isascii()
    assert '"' not in plain
    assert "\\" not in plain
    assert len(plain) == len(name)


def test_a_name_that_is_no_name_downloads_as_download() -> None:
    assert _filename(content_disposition("")) == ("download", "download")
    assert _filename(content_disposition(".."))[1] == "download"


def test_the_etag_names_the_restore_point_the_path_and_the_version() -> None:
    tag = entity_tag("rp1", 1, "/etc/hosts", 10, "2026-11-27T06:00:00Z")
    assert tag.startswith('"')
    assert tag.endswith('"')
    assert len(tag) == 34
    assert tag == entity_tag("rp1", 1, "/etc/hosts", 10, "2026-11-27T06:00:00Z")
    others = {entity_tag("rp2", 1, "/etc/hosts", 10, "2026-11-27T06:00:00Z"),
              entity_tag("rp1", None, "/etc/hosts", 10, "2026-11-27T06:00:00Z"),
              entity_tag("rp1", 1, "/etc/host", 10, "2026-11-27T06:00:00Z"),
              entity_tag("rp1", 1, "/etc/hosts", 11, "2026-11-27T06:00:00Z"),
              entity_tag("rp1", 1, "/etc/hosts", 10, None)}
    assert tag not in others
    assert len(others) == 5
