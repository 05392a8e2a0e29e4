"""Kept-alive connections that are no longer there: one idle past the pool's bound is not
reused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.storage.s3_requests import S3Requests
from services.storage.sigv4 import Signer
from tests.unit.services.storage.fake_s3 import FakeS3, UnixPool

TIMEOUT = 0.2
RATE = 1 << 20


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeS3]:
    server = FakeS3(tmp_path)
    yield server
    server.close()


def _requests(pool: UnixPool) -> S3Requests:
    return S3Requests(pool, Signer("AK", "SK", "us-east-1"), "b",
                      min_read_bytes_per_second=RATE, sleep=lambda _s: None)


def test_a_connection_idle_past_the_bound_is_not_reused(fake: FakeS3) -> None:
    pool = fake.pool(timeout=TIMEOUT)
    requests = _requests(pool)
    assert requests.send("DELETE", "k").status == 204
    assert requests.send("DELETE", "k").status == 204
    assert fake.accepted == 1
    pool.idle_seconds = 0.0
    assert requests.send("DELETE", "k").status == 204
    assert fake.accepted == 2
