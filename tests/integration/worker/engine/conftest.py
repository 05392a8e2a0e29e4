"""Fixtures of the engine's integration tests: a scratch prefix in the local RGW's bucket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.storage.s3 import Bucket
from tests.support import rgw


@pytest.fixture
def bucket() -> Iterator[Bucket]:
    with rgw.scratch_bucket() as scratch:
        yield scratch
