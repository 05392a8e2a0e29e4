"""The two sides of a job's preparation run at the same time, and what either opened is
closed however the other ended."""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack

import pytest

from worker.managers.side_by_side import side_by_side


def test_the_two_sides_overlap() -> None:
    barrier = threading.Barrier(2, timeout=5)

    def side(stack: ExitStack) -> str:
        barrier.wait()  # only returns when the other side is running too
        return threading.current_thread().name

    with ExitStack() as stack:
        here, there = side_by_side(stack, side, side)
    assert here == threading.current_thread().name
    assert there != here


def test_a_failing_side_waits_for_the_other_and_both_stacks_close() -> None:
    closed: list[str] = []

    def here(stack: ExitStack) -> None:
        stack.callback(closed.append, "here")
        raise ValueError("source gone")

    def there(stack: ExitStack) -> None:
        time.sleep(0.2)  # still opening when `here` fails
        stack.callback(closed.append, "there")

    with pytest.raises(ValueError, match="source gone"), ExitStack() as stack:
        side_by_side(stack, here, there)
    assert sorted(closed) == ["here", "there"]


def test_the_helper_sides_error_is_raised_after_this_side_ends() -> None:
    closed: list[str] = []

    def here(stack: ExitStack) -> str:
        stack.callback(closed.append, "here")
        return "ok"

    def there(stack: ExitStack) -> str:
        raise KeyError("target")

    with pytest.raises(KeyError), ExitStack() as stack:
        side_by_side(stack, here, there)
    assert closed == ["here"]
