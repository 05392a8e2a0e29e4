"""Which objects a group member's incremental may skip: only those whose digest equals the
base's and that were not written on the backup image's head since the base."""

from __future__ import annotations

from worker.engine.copy import Unchanged


def test_an_object_is_skipped_only_when_the_head_surely_holds_it() -> None:
    unchanged = Unchanged({0: b"a", 1: b"b"}, frozenset({1}))
    assert unchanged.holds(0, b"a")
    assert not unchanged.holds(0, b"changed")
    assert not unchanged.holds(1, b"b")  # the head changed there since the base
    assert not unchanged.holds(2, b"new")  # the base had nothing there
