"""Fixtures the worker's integration tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.storage.s3 import Bucket
from tests.support.stack import Stack

OBJECT_TARGET = "s3"
"""The stack's object target (the local RGW's bucket, a prefix of the stack's own)."""


@pytest.fixture
def bucket(stack: Stack) -> Iterator[Bucket]:
    """The stack's object target's bucket, for a test to look into what a job stored."""
    if OBJECT_TARGET not in stack.settings.object_targets:
        pytest.fail("the local RGW is not running: start the stack with CAIRN_RGW=1")
    opened = Bucket(stack.settings.object_targets[OBJECT_TARGET])
    yield opened
    opened.close()
