"""Garbage collection over what a bucket's holder (or its endpoint) can put in a listing: a
listing that is refused stops the collection before its sweep, whatever it listed so far;
names under manifests/ that are not Cairn's are left alone and stop nothing; a manifest
named as Cairn's that does not open still stops the sweep (its chunks may be a restore
point's). Over an endpoint in the test's process (`fake_s3.py`), with the database in
SQLite."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pytest

from services.db import Database
from services.errors import DataCorrupt, StorageError
from services.storage import s3
from services.storage.object_layout import chunk_key, manifest_key
from tests.unit.services.storage.fake_s3 import FakeS3, Handler
from worker.engine import chunk_gc
from worker.engine.chunk_store import ChunkStore, ObjectManifest

OPERATOR_KEY = bytes(range(32))
RP = "0b5e4f9a-1111-4222-8333-944445555666"
OTHER_RP = "0b5e4f9a-2222-4222-8333-944445555666"
KiB = 1 << 10
AFTER_EVERYTHING = datetime(2100, 1, 1, tzinfo=UTC)
"""A cutoff after every object's time (the fake's are 2026-11-27): only a mark keeps one."""


@dataclass
class Target:
    fake: FakeS3
    store: ChunkStore
    kept: str
    """The key of a chunk the manifest names."""
    freed: str
    """The key of a chunk no manifest names: a sweep deletes it."""

    def holds(self, key: str) -> bool:
        return "/b/p/" + quote(key, safe="/~") in self.fake.objects

    def plant(self, key: str, data: bytes = b"planted") -> None:
        self.fake.objects["/b/p/" + quote(key, safe="/~")] = data


@pytest.fixture
def target(db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Target]:
    fake = FakeS3(tmp_path)
    monkeypatch.setattr(s3, "ConnectionPool", lambda *_a: fake.pool(timeout=0.2))
    bucket = s3.Bucket(fake.settings(tmp_path, timeout_seconds=0.2,
                                     min_read_bytes_per_second=16 << 20))
    bucket._requests._sleep = lambda _s: None
    store = ChunkStore.open(db, bucket, "s3", OPERATOR_KEY, create=True)
    kept, freed = (store.codec().seal_chunk("project-a", os.urandom(KiB)) for _ in range(2))
    for sealed in (kept, freed):
        store.put_chunk("project-a", sealed)
    store.write_manifest("project-a", RP, ObjectManifest(KiB, 2 * KiB, {0: kept.name}))
    yield Target(fake, store, chunk_key("project-a", kept.name),
                 chunk_key("project-a", freed.name))
    bucket.close()
    fake.close()


def _page(keys: list[str], token: str | None) -> object:
    more = (f"<IsTruncated>true</IsTruncated><NextContinuationToken>{token}"
            "</NextContinuationToken>") if token else "<IsTruncated>false</IsTruncated>"
    body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>' + more + "".join(
        f"<Contents><Key>p/{key}</Key><Size>1</Size><LastModified>2026-11-27T13:00:00Z"
        "</LastModified></Contents>" for key in keys) + "</ListBucketResult>").encode()

    def reply(handler: Handler) -> None:
        handler.answer(200, body, {"Content-Type": "application/xml"})
    return reply


def test_the_collection_frees_what_no_manifest_names(target: Target) -> None:
    stats = chunk_gc.collect(target.store, {RP: 2 * KiB}, AFTER_EVERYTHING, deadline=math.inf)
    assert (stats.manifests, stats.chunks_deleted, stats.strangers) == (1, 1, 0)
    assert target.holds(target.kept)
    assert not target.holds(target.freed)


@pytest.mark.parametrize("pages", [
    # Tokens that cycle (A, B, A...), a new name on each page: endless.
    [([f"manifests/project-a/x{n:03d}"], "AB"[n % 2]) for n in range(200)],
    # The manifest twice: a store lists each key once.
    [([manifest_key("project-a", RP), manifest_key("project-a", RP)], None)],
    # Keys going back across pages.
    [(["manifests/project-a/zz"], "t"), ([manifest_key("project-a", RP)], None)],
], ids=["cycling tokens", "a key twice", "keys going back"])
def test_a_refused_listing_of_the_manifests_stops_the_collection_before_its_sweep(
        target: Target, pages: list[tuple[list[str], str | None]]) -> None:
    target.fake.replies += [_page(keys, token) for keys, token in pages]  # type: ignore[misc]
    target.fake.seen.clear()
    with pytest.raises(StorageError, match="not a listing Cairn takes"):
        chunk_gc.collect(target.store, {RP: 2 * KiB}, AFTER_EVERYTHING, deadline=math.inf)
    assert target.holds(target.freed)  # nothing swept
    assert len(target.fake.seen) <= 3


def test_names_under_manifests_that_are_not_cairns_are_left_alone_and_stop_nothing(
        target: Target, caplog: pytest.LogCaptureFixture) -> None:
    planted = ["manifests/project-a/junk", f"manifests/project-a/{RP}.bak",
               f"manifests/{RP}", f"manifests/project-a/sub/{RP}",
               f"manifests/a\nb/{OTHER_RP}", f"manifests/project-a/{OTHER_RP}\n"]
    for key in planted:
        target.plant(key)
    stats = chunk_gc.collect(target.store, {RP: 2 * KiB}, AFTER_EVERYTHING, deadline=math.inf)
    # The two names holding a line feed never leave the listing; the rest are strangers.
    assert (stats.manifests, stats.chunks_deleted, stats.strangers) == (1, 1, 4)
    assert target.holds(target.kept)
    assert not target.holds(target.freed)
    assert all(target.holds(key) for key in planted)
    assert "'manifests/project-a/junk'" in caplog.text
    assert "a\nb" not in caplog.text
    assert f"{OTHER_RP}\n" not in caplog.text


def test_a_manifest_named_as_cairns_that_does_not_open_stops_the_sweep(
        target: Target) -> None:
    """Its chunks may be a restore point's: none may go while it cannot be read."""
    target.plant(manifest_key("project-b", OTHER_RP), b"not a sealed manifest")
    with pytest.raises(DataCorrupt, match=OTHER_RP):
        chunk_gc.collect(target.store, {RP: 2 * KiB}, AFTER_EVERYTHING, deadline=math.inf)
    assert target.holds(target.freed)


def test_the_sweep_deletes_nothing_past_the_collections_deadline(target: Target) -> None:
    # It looked at its time only when it asked for a page (1000 keys): every delete of the
    # page was still made past it, the target's exclusive lease held for each.
    for _ in range(5):
        target.store.put_chunk("project-a", target.store.codec().seal_chunk(
            "project-a", os.urandom(KiB)))
    marked = chunk_gc.mark(target.store, {RP: 2 * KiB}, deadline=math.inf)
    backend = target.store.backend
    deleted: list[str] = []

    def slow_delete(key: str) -> None:  # an endpoint answering each just inside its time
        time.sleep(0.1)
        deleted.append(key)

    backend.delete = slow_delete  # type: ignore[method-assign]
    with pytest.raises(StorageError, match="ran out of its time"):
        chunk_gc.sweep(target.store, marked, AFTER_EVERYTHING,
                       deadline=time.monotonic() + 0.05)
    assert len(deleted) == 1  # the one under way at the deadline
    assert target.kept not in deleted


def test_the_mark_reads_no_manifest_past_the_collections_deadline(target: Target) -> None:
    # An endpoint that changes a manifest's time makes the leased mark read every one again.
    target.fake.seen.clear()
    manifests = list(target.store.backend.list("manifests/", deadline=math.inf))
    with pytest.raises(StorageError, match="ran out of its time"):
        chunk_gc.mark(target.store, {RP: 2 * KiB}, manifests=manifests,
                      deadline=time.monotonic() - 1)
    assert [method for method, *_ in target.fake.seen] == ["GET"]  # the listing only
