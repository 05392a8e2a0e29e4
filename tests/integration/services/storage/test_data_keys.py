"""An object target's data key on the local Ceph RGW (Debian's radosgw), recorded in Cairn's
database (each backend): made exactly once under racing writers, whether the store honours
the write's condition or not; adopted once from a bucket made before the database recorded
keys; never made beside data or where a key was stored; never used when the bucket holds
another key than the record; followed through a rewrap by a new operator's key."""

from __future__ import annotations

import hashlib
import json
import math
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest

from services.db import Database
from services.errors import (
    StorageError,
    TargetKeyChanged,
    TargetKeyMissing,
    TargetNeverWritten,
)
from services.storage import data_keys, key_records
from services.storage.object_keys import new_data_key, unwrap_data_key, wrap_data_key
from services.storage.object_layout import DATA_KEY, chunk_key, manifest_key
from services.storage.s3 import Bucket
from tests.support import rgw
from tests.support.rgw import OPERATOR_KEY
from tests.support.s3_proxy import S3Proxy

WRITERS = 8
ROUNDS = 10


@pytest.fixture
def bucket() -> Iterator[Bucket]:
    with rgw.scratch_bucket() as scratch:
        yield scratch


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.engine.dispose()


@pytest.fixture
def target() -> str:
    """A target name of the test's own: its record is the test's alone."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def proxy() -> Iterator[S3Proxy]:
    running = S3Proxy(json.loads(rgw.CREDENTIALS.read_text())["endpoint"], rgw.CREDENTIALS)
    yield running
    running.close()


def _through(proxy: S3Proxy, bucket: Bucket) -> Bucket:
    """The same bucket and prefix, reached through the proxy."""
    return Bucket(bucket.settings.model_copy(update={"endpoint": proxy.endpoint}))


def _at_once(count: int, work: Callable[[], object]) -> list[object]:
    start = threading.Barrier(count)
    done: list[object] = []

    def run() -> None:
        start.wait()
        try:
            done.append(work())
        except Exception as exc:
            done.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return done


def test_rgw_stores_the_first_of_racing_conditional_writes_and_refuses_the_others(
        bucket: Bucket) -> None:
    """What the bucket's copy rests on: RGW checks If-None-Match: * atomically. Each round,
    WRITERS threads (each its own connection) write one new key at once."""
    for round_ in range(ROUNDS):
        key = f"race/{round_}"
        start = threading.Barrier(WRITERS)
        won: list[bytes] = []

        def write(n: int, key: str = key, start: threading.Barrier = start,
                  won: list[bytes] = won) -> None:
            body = f"writer {n}".encode()
            start.wait()
            if bucket.put_new(key, body):
                won.append(body)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len(won) == 1, f"round {round_}: {len(won)} writers were told they wrote"
        assert bucket.get(key, limit=64) == won[0], f"round {round_}"
    assert not bucket.put_new(key, b"late"), "a later write replaced the object"


@pytest.mark.parametrize("store", ["honours the condition", "ignores the condition"])
def test_racing_first_opens_all_get_the_one_recorded_key(
        db: Database, bucket: Bucket, target: str, proxy: S3Proxy, store: str) -> None:
    """Every racing writer seals with the key recorded first, and every key write carries
    that record's bytes: on a store that ignores the condition the writes all land, and
    the last one stored is the recorded key all the same."""
    if store == "ignores the condition":
        proxy.ignore_conditions(bucket.settings.prefix)
    seen = _through(proxy, bucket)
    try:
        opened = _at_once(WRITERS, lambda: data_keys.opened(db, seen, target, OPERATOR_KEY,
                                                            create=True))
    finally:
        seen.close()
    assert not [o for o in opened if isinstance(o, Exception)], opened
    record = key_records.get(db, target)
    assert record is not None
    assert record.origin == "made"
    assert {o.fingerprint for o in opened if isinstance(o, data_keys.DataKey)} == {
        record.fingerprint}
    assert bucket.get(DATA_KEY, limit=1024) == record.wrapped
    writes = [s for s in proxy.seen if s.method == "PUT" and s.path.endswith(DATA_KEY)]
    assert writes, "no key write went through the proxy"
    assert {w.body_sha256 for w in writes} == {hashlib.sha256(record.wrapped).hexdigest()}, \
        writes
    if store == "ignores the condition":
        assert [w.status for w in writes].count(200) >= 1
    assert record.stored_at is not None, "the key was never seen stored"


def test_a_key_stored_before_the_database_recorded_keys_is_adopted_once(
        db: Database, bucket: Bucket, target: str) -> None:
    wrapped = wrap_data_key(OPERATOR_KEY, target, new_data_key())
    bucket.put(DATA_KEY, wrapped)
    bucket.put(manifest_key("p", "00000000-0000-0000-0000-000000000000"), b"sealed")
    opened = _at_once(WRITERS, lambda: data_keys.opened(db, bucket, target, OPERATOR_KEY,
                                                        create=True))
    record = key_records.get(db, target)
    assert record is not None
    assert (record.origin, record.wrapped) == ("adopted", wrapped)
    assert {o.fingerprint for o in opened if isinstance(o, data_keys.DataKey)} == {
        record.fingerprint}, opened
    assert bucket.get(DATA_KEY, limit=1024) == wrapped


@pytest.mark.parametrize("held", ["chunks", "manifests"])
def test_no_key_is_made_beside_data(db: Database, bucket: Bucket, target: str,
                                    held: str) -> None:
    with pytest.raises(TargetNeverWritten):
        data_keys.opened(db, bucket, target, OPERATOR_KEY, create=False)
    bucket.put(chunk_key("p", "ab" * 32) if held == "chunks" else
               manifest_key("p", "00000000-0000-0000-0000-000000000000"), b"sealed")
    for create in (True, False):
        with pytest.raises(TargetKeyMissing, match=f"holds {held} but no data key"):
            data_keys.opened(db, bucket, target, OPERATOR_KEY, create=create)
    assert bucket.size(DATA_KEY) is None
    assert key_records.get(db, target) is None
    assert data_keys.data_without_key(bucket) == held


def test_an_empty_prefix_where_the_key_was_stored_is_not_given_a_new_one(
        db: Database, bucket: Bucket, target: str) -> None:
    """The target pointed at another (empty) prefix, or everything there removed: no new
    key, nothing written, and the operator is told where the key is."""
    made = data_keys.opened(db, bucket, target, OPERATOR_KEY, create=True)
    bucket.delete(DATA_KEY)
    with pytest.raises(TargetKeyMissing, match="points at another bucket and prefix") as refused:
        data_keys.opened(db, bucket, target, OPERATOR_KEY, create=True)
    assert f"cairn-manage object-key export {target}" in refused.value.message
    assert list(bucket.list(deadline=math.inf)) == []
    assert "pointed at another bucket and prefix" in (data_keys.problem(db, bucket, target)
                                                      or "")
    bucket.put(DATA_KEY, made.wrapped)
    assert data_keys.opened(db, bucket, target, OPERATOR_KEY).fingerprint == made.fingerprint
    assert data_keys.problem(db, bucket, target) is None


@pytest.mark.parametrize("wrapped_by", ["the operator's key", "a key Cairn does not hold"])
def test_a_bucket_holding_another_key_than_the_record_is_neither_used_nor_replaced(
        db: Database, bucket: Bucket, target: str, wrapped_by: str) -> None:
    """An old worker's key (wrapped by the operator's key), or the bucket holder's (by a key
    of its own): either way the bucket's key was replaced; it is not the operator's key
    that is wrong."""
    made = data_keys.opened(db, bucket, target, OPERATOR_KEY, create=True)
    other = wrap_data_key(OPERATOR_KEY if wrapped_by == "the operator's key" else bytes(32),
                          target, new_data_key())
    bucket.put(DATA_KEY, other)
    for create in (True, False):
        with pytest.raises(TargetKeyChanged, match="not the one Cairn's database records"):
            data_keys.opened(db, bucket, target, OPERATOR_KEY, create=create)
    with pytest.raises(TargetKeyChanged, match="replaced while the job ran"):
        data_keys.check(db, bucket, target, made, OPERATOR_KEY)
    assert bucket.get(DATA_KEY, limit=1024) == other
    assert key_records.get(db, target).fingerprint == made.fingerprint  # type: ignore[union-attr]
    assert "other than the one Cairn's database records" in (
        data_keys.problem(db, bucket, target) or "")


def test_a_key_wrapped_anew_by_a_new_operator_key_is_the_same_key(
        db: Database, bucket: Bucket, target: str) -> None:
    """A rotation of the operator's key while a job runs: its commit check opens the key
    with the operator's key configured now, and the database's copy follows the rewrap."""
    running = data_keys.opened(db, bucket, target, OPERATOR_KEY, create=True)
    rotated = bytes(reversed(range(32)))
    rewrapped = wrap_data_key(rotated, target, unwrap_data_key(OPERATOR_KEY, target,
                                                               running.wrapped))
    bucket.put(DATA_KEY, rewrapped)
    data_keys.check(db, bucket, target, running, rotated)
    reopened = data_keys.opened(db, bucket, target, rotated)
    assert reopened.fingerprint == running.fingerprint
    assert key_records.get(db, target).wrapped == rewrapped  # type: ignore[union-attr]
    assert data_keys.problem(db, bucket, target) is None


def test_a_store_that_refuses_the_condition_is_named_as_the_cause(
        db: Database, bucket: Bucket, target: str, proxy: S3Proxy) -> None:
    proxy.refuse_conditions(bucket.settings.prefix)
    seen = _through(proxy, bucket)
    try:
        with pytest.raises(StorageError, match="If-None-Match") as refused:
            data_keys.opened(db, seen, target, OPERATOR_KEY, create=True)
    finally:
        seen.close()
    assert "the store must take it" in refused.value.message
    assert bucket.size(DATA_KEY) is None
