"""The object target's listings and its data key's conditional write, against an endpoint in
the test's process (`fake_s3.py`): read on the same bounded path as chunks (a listing's
page at most `page_limit` bytes, refused unread past it; within the request's deadline),
parsed with every DTD refused, paged across continuation tokens; the conditional write as
it was with boto3 (412 is "already there", a store that refuses the condition is named)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pytest

from services.errors import StorageError, StorageUnavailable
from services.storage import s3
from services.storage.s3_listing import NotAListing, parse
from tests.unit.services.storage.fake_s3 import FakeS3, Handler, error_body

LISTING = b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
BOMB = (b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
        b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        b"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>p/&b;</Key>"
        b"<Size>1</Size><LastModified>2026-11-27T13:00:00Z</LastModified></Contents>"
        b"</ListBucketResult>")
EXTERNAL = (b'<?xml version="1.0"?><!DOCTYPE l SYSTEM "http://evil.example/l.dtd">'
            b"<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>")


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeS3]:
    server = FakeS3(tmp_path)
    yield server
    server.close()


@pytest.fixture
def bucket(fake: FakeS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[s3.Bucket]:
    monkeypatch.setattr(s3, "ConnectionPool",
                        lambda *_a: fake.pool(timeout=0.2))
    opened = s3.Bucket(fake.settings(tmp_path, timeout_seconds=0.2,
                                     min_read_bytes_per_second=16 << 20))
    opened._requests._sleep = lambda _s: None
    yield opened
    opened.close()


def _reply(body: bytes) -> object:
    def reply(handler: Handler) -> None:
        handler.answer(200, body, {"Content-Type": "application/xml"})
    return reply


def test_listings_page_across_continuation_tokens(bucket: s3.Bucket, fake: FakeS3) -> None:
    names = [f"chunks/p/{n:04x}" for n in range(2100)] + ["manifests/p/rp 1+a"]
    for name in names:  # as bucket.put would store them (2100 requests: 0.4 s)
        fake.objects["/b/p/" + quote(name, safe="/~")] = b"x" * (len(name) % 7)
    fake.objects["/b/other/chunks/p/0000"] = b"not this target's"
    fake.seen.clear()
    listed = list(bucket.list("chunks/", deadline=math.inf))
    assert [stored.key for stored in listed] == names[:-1]
    assert [stored.size for stored in listed] == [len(name) % 7 for name in names[:-1]]
    assert listed[0].modified == datetime(2026, 11, 27, 13, tzinfo=UTC)
    pages = [path for _, path, _ in fake.seen]
    assert len(pages) == 3
    assert all("prefix=p%2Fchunks%2F" in page and "max-keys=1000" in page for page in pages)
    assert "continuation-token" not in pages[0]
    assert "continuation-token" in pages[1]
    assert "continuation-token" in pages[2]
    # Keys come url-encoded (encoding-type=url) and are given back as stored.
    assert [stored.key for stored in bucket.list("manifests/", deadline=math.inf)] == [
        "manifests/p/rp 1+a"]
    assert [stored.key for stored in bucket.list(deadline=math.inf)] == names
    assert bucket.holds_any("manifests/")
    assert not bucket.holds_any("keys/")
    assert "max-keys=1&" in fake.seen[-1][1]


def test_a_listing_answered_past_its_bound_is_refused_unread(
        bucket: s3.Bucket, fake: FakeS3) -> None:
    sent: list[int] = []

    def huge(handler: Handler, announced: bool) -> None:  # 300 MiB, until the client hangs up
        handler.send_response(200)
        if announced:
            handler.send_header("Content-Length", str(300 << 20))
        else:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        total = 0
        piece = LISTING + b"x" * ((64 << 10) - len(LISTING))
        framed = piece if announced else b"%x\r\n" % len(piece) + piece + b"\r\n"
        try:
            while total < 300 << 20:
                handler.wfile.write(framed)
                total += len(piece)
        except OSError:
            pass
        sent.append(total)
        handler.close_connection = True

    fake.replies += [lambda handler: huge(handler, True), lambda handler: huge(handler, False)]
    limit = s3.page_limit(s3.LIST_PAGE_KEYS)
    assert 2_000_000 < limit < 3 << 20
    for _ in range(2):
        with pytest.raises(StorageError, match="listing the target with something that is "
                                               "not a listing"):
            list(bucket.list(deadline=math.inf))
    deadline = time.monotonic() + 5
    while len(sent) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(sent) == 2, "the endpoint never finished"
    assert sent[0] < 16 << 20, sent  # refused at the head: what the socket buffers held
    assert sent[1] < limit + (16 << 20), sent  # read to the bound and a byte, no further
    assert len(fake.seen) == 2  # neither tried again


@pytest.mark.parametrize("body", [
    BOMB, EXTERNAL, BOMB.decode().encode("utf-16"),  # the DOCTYPE in another encoding
    LISTING + b"<IsTruncated>false</IsTruncated><Contents><Key>p/&x;</Key></Contents>"
              b"</ListBucketResult>",  # an entity that was never declared
])
def test_a_listing_with_a_doctype_or_entity_is_refused(
        bucket: s3.Bucket, fake: FakeS3, body: bytes) -> None:
    fake.replies.append(_reply(body))  # type: ignore[arg-type]
    with pytest.raises(StorageError, match="not a listing Cairn takes"):
        list(bucket.list(deadline=math.inf))
    with pytest.raises(NotAListing):
        parse(body, "p/")


@pytest.mark.parametrize(("body", "why"), [
    (b"<Error><Code>x</Code></Error>", "a document of 'Error'"),
    (LISTING + b"<IsTruncated>true</IsTruncated></ListBucketResult>", "without a continuation"),
    (LISTING + b"<Contents><Key>q/elsewhere</Key><Size>1</Size><LastModified>"
     b"2026-11-27T13:00:00Z</LastModified></Contents></ListBucketResult>", "outside the prefix"),
    (LISTING + b"<Contents><Key>p/k</Key><Size>-1</Size><LastModified>"
     b"2026-11-27T13:00:00Z</LastModified></Contents></ListBucketResult>", "the size"),
    (LISTING + b"<Contents><Key>p/k</Key><Size>1</Size><LastModified>yesterday"
     b"</LastModified></Contents></ListBucketResult>", "time of last write"),
    (LISTING + b"<Contents><Key>p/k</Key>", "not well-formed"),
])
def test_what_is_not_a_listing_is_refused(body: bytes, why: str) -> None:
    with pytest.raises(NotAListing, match=why):
        parse(body, "p/")


def test_a_token_given_twice_ends_the_listing(bucket: s3.Bucket, fake: FakeS3) -> None:
    again = _reply(LISTING + b"<IsTruncated>true</IsTruncated><NextContinuationToken>t"
                   b"</NextContinuationToken></ListBucketResult>")
    fake.replies += [again, again, again]  # type: ignore[list-item]
    with pytest.raises(StorageError, match="not a listing"):
        list(bucket.list(deadline=math.inf))
    assert len(fake.seen) == 2


def _page(keys: list[bytes], token: bytes | None) -> object:
    more = (b"<IsTruncated>true</IsTruncated><NextContinuationToken>" + token
            + b"</NextContinuationToken>") if token else b"<IsTruncated>false</IsTruncated>"
    return _reply(LISTING + more + b"".join(
        b"<Contents><Key>" + key + b"</Key><Size>1</Size><LastModified>2026-11-27T13:00:00Z"
        b"</LastModified></Contents>" for key in keys) + b"</ListBucketResult>")


def test_tokens_that_cycle_end_the_listing(bucket: s3.Bucket, fake: FakeS3) -> None:
    # A, B, A, B...: never the same token twice in a row, and new keys on every page.
    fake.replies += [_page([b"p/k%03d" % n], b"AB"[n % 2:n % 2 + 1])  # type: ignore[misc]
                     for n in range(50)]
    with pytest.raises(StorageError, match="not a listing Cairn takes"):
        list(bucket.list(deadline=math.inf))
    assert len(fake.seen) == 3


def test_a_listing_that_pages_past_its_deadline_is_refused(
        bucket: s3.Bucket, fake: FakeS3) -> None:
    # Pages without keys, each with a new token: no key repeats, no token; they could come
    # for ever.
    fake.replies += [_page([], b"t%d" % n) for n in range(5000)]  # type: ignore[misc]
    started = time.monotonic()
    with pytest.raises(StorageError, match="not a listing Cairn takes"):
        list(bucket.list(deadline=started + 0.2))
    assert time.monotonic() - started < 0.5
    assert 1 < len(fake.seen) < 5000


@pytest.mark.parametrize("pages", [
    [[b"p/a", b"p/a"]],  # twice on one page
    [[b"p/b", b"p/a"]],  # going back
    [[b"p/a", b"p/b"], [b"p/b"]],  # twice, across pages
    [[b"p/a", b"p/c"], [b"p/b", b"p/d"]],  # back, across pages
])
def test_keys_repeated_or_out_of_order_are_refused(
        bucket: s3.Bucket, fake: FakeS3, pages: list[list[bytes]]) -> None:
    fake.replies += [_page(keys, b"t%d" % n if n < len(pages) - 1 else None)  # type: ignore[misc]
                     for n, keys in enumerate(pages)]
    with pytest.raises(StorageError, match="not a listing Cairn takes"):
        list(bucket.list(deadline=math.inf))


def test_a_key_with_control_characters_is_left_out_and_logged_escaped(
        bucket: s3.Bucket, fake: FakeS3, caplog: pytest.LogCaptureFixture) -> None:
    planted = b"p/manifests/..%2F..%2Fx/a%0Ab%00%1B%5B2J"
    fake.replies.append(_reply(  # type: ignore[arg-type]
        LISTING + b"<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
        + b"".join(b"<Contents><Key>" + key + b"</Key><Size>1</Size><LastModified>"
                   b"2026-11-27T13:00:00Z</LastModified></Contents>"
                   for key in (planted, b"p/manifests/a", b"p/manifests/b"))
        + b"</ListBucketResult>"))
    assert [stored.key for stored in bucket.list(deadline=math.inf)] == [
        "manifests/a", "manifests/b"]
    assert "'p/manifests/../../x/a\\nb\\x00\\x1b[2J'" in caplog.text
    assert "\n" not in caplog.text.strip()
    assert "\x1b" not in caplog.text
    # It is still an object: a target holding only it does not hold nothing.
    fake.replies.append(_page([planted], None))  # type: ignore[arg-type]
    assert bucket.holds_any("manifests/")


def test_a_refused_listing_is_told_as_before(bucket: s3.Bucket, fake: FakeS3) -> None:
    fake.replies.append(lambda handler: handler.answer(403, error_body("AccessDenied")))
    with pytest.raises(StorageUnavailable, match=r"refused listing manifests/ .*AccessDenied"):
        bucket.holds_any("manifests/")


def test_the_conditional_put_keeps_its_semantics(bucket: s3.Bucket, fake: FakeS3) -> None:
    assert bucket.put_new("keys/data-key", b"first")
    assert not bucket.put_new("keys/data-key", b"second")
    assert fake.objects["/b/p/keys/data-key"] == b"first"
    for _, _, headers in fake.seen:
        sent = {name.lower(): value for name, value in headers.items()}
        assert sent["if-none-match"] == "*"
        assert "if-none-match" in sent["authorization"]  # signed
        assert "expect" not in sent

    def status(code: int, name: str) -> object:
        return lambda handler: handler.answer(code, error_body(name))

    fake.replies += [status(409, "ConditionalRequestConflict"),  # type: ignore[list-item]
                     status(501, "NotImplemented"), status(403, "AccessDenied"),
                     status(400, "MalformedXML")]
    assert not bucket.put_new("keys/other", b"x")
    with pytest.raises(StorageError, match=r"refused to write keys/other only if it is not "
                                           r"there yet \(If-None-Match: \*, answered "
                                           r"NotImplemented\)"):
        bucket.put_new("keys/other", b"x")
    with pytest.raises(StorageUnavailable, match=r"refused writing keys/other .*AccessDenied"):
        bucket.put_new("keys/other", b"x")
    with pytest.raises(StorageError, match=r"failed writing keys/other \(MalformedXML\)"):
        bucket.put_new("keys/other", b"x")


def test_a_trickled_answer_to_the_conditional_put_ends_at_its_deadline(
        bucket: s3.Bucket, fake: FakeS3) -> None:
    def trickle(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "4096")
        handler.end_headers()
        try:
            for _ in range(100):
                handler.wfile.write(b" ")
                handler.wfile.flush()
                time.sleep(0.02)
        except OSError:
            pass
        handler.close_connection = True

    fake.replies.append(trickle)
    started = time.monotonic()
    with pytest.raises(StorageUnavailable, match="did not complete writing keys/data-key"):
        bucket.put_new("keys/data-key", b"x")
    assert time.monotonic() - started < 0.6


def test_the_buckets_check_is_a_bounded_listing_of_one_key(
        bucket: s3.Bucket, fake: FakeS3) -> None:
    bucket.check()
    assert "list-type=2" in fake.seen[-1][1]
    assert "max-keys=1&" in fake.seen[-1][1]
    fake.replies.append(lambda handler: handler.answer(403, error_body("AccessDenied")))
    with pytest.raises(StorageUnavailable, match=r"refused listing the target .*check the "
                                                 r"target's credentials"):
        bucket.check()

    def trickle(handler: Handler) -> None:  # a head that never ends, a byte at a time
        try:
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 200:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(0.01)
        except OSError:
            pass
        handler.close_connection = True

    fake.replies.append(trickle)
    started = time.monotonic()
    with pytest.raises(StorageUnavailable):
        bucket.check()
    assert time.monotonic() - started < 1.0


def test_a_bounded_listing_asks_for_no_more_pages_than_its_bound_fills_and_a_margin(
        bucket: s3.Bucket, fake: FakeS3) -> None:
    # Pages without keys, each with a new token, answered at once: with no cap they would
    # go on to the deadline (a minute and more of requests) for nothing.
    fake.replies += [_page([], b"t%d" % n) for n in range(5000)]  # type: ignore[misc]
    with pytest.raises(StorageError, match="not a listing Cairn takes"):
        list(bucket.list(deadline=math.inf, most=2500))
    assert len(fake.seen) == 2500 // s3.LIST_PAGE_KEYS + s3.LIST_PAGES_MARGIN


def test_a_listing_remembers_only_its_last_tokens(
        bucket: s3.Bucket, fake: FakeS3, monkeypatch: pytest.MonkeyPatch) -> None:
    # What it holds does not grow with its pages: a token given again within the last
    # LIST_TOKENS_KEPT is refused; a longer cycle is ended by the page cap (or deadline).
    monkeypatch.setattr(s3, "LIST_TOKENS_KEPT", 4)
    fake.replies += [_page([], b"t%d" % (n % 4)) for n in range(50)]  # type: ignore[misc]
    with pytest.raises(StorageError, match="not a listing Cairn takes"):
        list(bucket.list(deadline=math.inf))
    assert len(fake.seen) == 5  # t0 t1 t2 t3, then t0 again
    fake.replies.clear()
    fake.seen.clear()
    fake.replies += [_page([], b"t%d" % (n % 5)) for n in range(500)]  # type: ignore[misc]
    with pytest.raises(StorageError, match="not a listing Cairn takes"):
        list(bucket.list(deadline=math.inf, most=0))
    assert len(fake.seen) == s3.LIST_PAGES_MARGIN
