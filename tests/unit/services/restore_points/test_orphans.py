"""The orphan reconciler against an endpoint that lists for ever (every ListObjectsV2 page
without keys, truncated, with a new token; `fake_s3.py`): each object target's scan ends
within CAIRN_ORPHAN_SCAN_TARGET_SECONDS, is reported, and the next target is scanned still.
The scan runs in cairn-scheduler's tick: without this, no scheduled backup would start."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from services.db import Database
from services.restore_points.orphans import OrphanReconciler, Report
from services.settings import Settings
from services.storage import s3
from tests.unit.services.storage.fake_s3 import FakeS3, Handler


class Endless(list[Callable[[Handler], None]]):
    """Replies to every request, after 10 ms: an empty page, truncated, with a new token
    (slow enough that the scan's time, not its cap on pages, ends it)."""

    tokens = itertools.count()

    def pop(self, _index: Any = 0) -> Callable[[Handler], None]:
        body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><IsTruncated>true'
                f"</IsTruncated><NextContinuationToken>t{next(self.tokens)}"
                "</NextContinuationToken></ListBucketResult>").encode()

        def reply(handler: Handler) -> None:
            time.sleep(0.01)
            handler.answer(200, body, {"Content-Type": "application/xml"})
        return reply

    def __bool__(self) -> bool:
        return True


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeS3]:
    server = FakeS3(tmp_path)
    server.replies = Endless()
    monkeypatch.setattr(server, "seen", type("Unkept", (list,), {"append": lambda *_: None})())
    monkeypatch.setattr(s3, "ConnectionPool", lambda *_a: server.pool(timeout=0.2))
    yield server
    server.close()


def test_a_target_that_lists_for_ever_is_reported_in_its_time_and_the_others_scanned(
        fake: FakeS3, db: Database, tmp_path: Path) -> None:
    template = fake.settings(tmp_path, timeout_seconds=0.2,
                             min_read_bytes_per_second=16 << 20).model_dump()
    settings = Settings(auth_strategy="noauth", environment="development",
                        orphan_scan_target_seconds=0.2,
                        object_targets={"a": {**template, "prefix": "a"},
                                        "b": {**template, "prefix": "b"}})
    reconciler = OrphanReconciler(db, None, settings)  # type: ignore[arg-type]
    reports: list[Report] = []
    ran = threading.Thread(target=lambda: reports.append(
        reconciler.run(apply=False, grace=timedelta(0))), daemon=True)
    ran.start()
    ran.join(5)
    assert reports, "the orphan scan never ended"
    errors = reports[0].errors
    assert len(errors) == 2, errors  # both targets: the first's stops not the second's
    assert all("did not end within 0 s (CAIRN_ORPHAN_SCAN_TARGET_SECONDS)" in error
               for error in errors), errors
