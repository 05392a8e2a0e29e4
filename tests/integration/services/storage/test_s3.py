"""The S3 driver against the local RGW through an endpoint on loopback that answers as a
hostile bucket holder would: a read trickled a few bytes at a time, each within every
per-read timeout, is abandoned at its deadline instead of holding its thread."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator

import pytest

from services.errors import StorageUnavailable
from services.storage.s3 import Bucket
from tests.support import rgw
from tests.support.s3_proxy import S3Proxy


@pytest.fixture
def bucket() -> Iterator[Bucket]:
    with rgw.scratch_bucket() as scratch:
        yield scratch


def test_a_trickled_read_is_abandoned_at_its_deadline(bucket: Bucket) -> None:
    proxy = S3Proxy(json.loads(rgw.CREDENTIALS.read_text())["endpoint"], rgw.CREDENTIALS)
    data = os.urandom(4096)
    bucket.put("slow/object", data)
    proxy.trickle("/slow/object")
    # 2 s plus 4 KiB at 1 KiB/s: 6 s. The proxy sends 8 bytes a second (8.5 minutes).
    slow = Bucket(bucket.settings.model_copy(update={
        "endpoint": proxy.endpoint, "timeout_seconds": 2, "min_read_bytes_per_second": 1024}))
    outcome: list[object] = []

    def read() -> None:
        try:
            outcome.append(slow.get("slow/object", limit=len(data)))
        except Exception as exc:
            outcome.append(exc)

    started = time.monotonic()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(30)
    took = time.monotonic() - started
    try:
        assert not reader.is_alive(), "the read was still going after 30 s"
        [failed] = outcome
        assert isinstance(failed, StorageUnavailable), failed
        assert "did not send slow/object within 6 s" in failed.message, failed.message
        assert took < 15, took
        # The store's normal answers are untouched by the deadline.
        assert bucket.get("slow/object", limit=len(data)) == data
    finally:
        slow.close()
        proxy.close()
