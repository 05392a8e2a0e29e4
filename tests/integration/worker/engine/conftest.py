"""Fixtures of the engine's integration tests: a scratch prefix in the local RGW's bucket,
and a database of its own recording the data keys of the targets they open."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.db import Database
from services.storage.s3 import Bucket
from tests.support import rgw


@pytest.fixture
def bucket() -> Iterator[Bucket]:
    with rgw.scratch_bucket() as scratch:
        yield scratch


@pytest.fixture
def keys_db(tmp_path: Path) -> Iterator[Database]:
    with rgw.key_database(tmp_path) as db:
        yield db
