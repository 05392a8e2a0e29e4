"""An object target's data key on the local Ceph RGW (Debian's radosgw): the conditional
write it is made with holds under racing writers, and no key is made beside data."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from services.errors import TargetKeyMissing, TargetNeverWritten
from services.storage import data_keys
from services.storage.object_layout import DATA_KEY, chunk_key, manifest_key
from services.storage.s3 import Bucket
from tests.support import rgw
from tests.support.rgw import OPERATOR_KEY

WRITERS = 8
ROUNDS = 10


@pytest.fixture
def bucket() -> Iterator[Bucket]:
    with rgw.scratch_bucket() as scratch:
        yield scratch


def test_rgw_stores_the_first_of_racing_conditional_writes_and_refuses_the_others(
        bucket: Bucket) -> None:
    """What the key's creation rests on: RGW checks If-None-Match: * atomically. Each round,
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


def test_racing_first_opens_all_get_the_one_key_stored(bucket: Bucket) -> None:
    keys: list[bytes] = []
    start = threading.Barrier(WRITERS)

    def open_key() -> None:
        start.wait()
        keys.append(data_keys.stored_or_made(bucket, "race", OPERATOR_KEY, create=True))

    threads = [threading.Thread(target=open_key) for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(keys) == WRITERS
    assert set(keys) == {bucket.get(DATA_KEY, limit=1024)}


@pytest.mark.parametrize("held", ["chunks", "manifests"])
def test_no_key_is_made_beside_data(bucket: Bucket, held: str) -> None:
    with pytest.raises(TargetNeverWritten):
        data_keys.stored_or_made(bucket, "t", OPERATOR_KEY, create=False)
    bucket.put(chunk_key("p", "ab" * 32) if held == "chunks" else
               manifest_key("p", "00000000-0000-0000-0000-000000000000"), b"sealed")
    for create in (True, False):
        with pytest.raises(TargetKeyMissing, match=f"holds {held} but no data key"):
            data_keys.stored_or_made(bucket, "t", OPERATOR_KEY, create=create)
    assert bucket.size(DATA_KEY) is None
    assert data_keys.data_without_key(bucket) == held
