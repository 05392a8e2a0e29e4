"""The flatten's progress callback as pure logic: it counts and paces only the objects that
hold data, and a cancel stops librbd (a non-zero answer) and is raised afterwards."""

from __future__ import annotations

from typing import Any

import pytest

from worker.engine.copy import CopyStats
from worker.managers.instant_restore import FlattenProgress
from worker.managers.signals import JobCancelled

OBJECT = 4 << 20


class Pacer:
    def __init__(self) -> None:
        self.taken: list[tuple[int, int]] = []

    def take(self, nbytes: int, nops: int = 1) -> float:
        self.taken.append((nbytes, nops))
        return 0.5


class Reporter:
    def __init__(self, cancel_after: int = 1000) -> None:
        self.pacer = Pacer()
        self.calls = 0
        self.cancel_after = cancel_after

    def progress(self, stats: Any) -> None:
        self.calls += 1
        if self.calls > self.cancel_after:
            raise JobCancelled("cancelled at the user's request")


def test_only_data_objects_count_and_are_paced() -> None:
    reporter = Reporter()
    stats = CopyStats(bytes_total=3 * OBJECT)
    progress = FlattenProgress(reporter, stats, [0, 5, 9], OBJECT)  # type: ignore[arg-type]
    assert progress(1, 256) == 0  # object 0 done
    assert progress(5, 256) == 0  # holes 1-4: nothing to pace
    assert progress(256, 256) == 0
    assert reporter.pacer.taken == [(OBJECT, 1), (2 * OBJECT, 2)]
    assert stats.bytes_done == 3 * OBJECT
    assert stats.qos_wait_seconds == 1.0
    progress.raise_stop()  # nothing to raise


def test_a_cancel_stops_librbd_and_is_raised_after() -> None:
    reporter = Reporter(cancel_after=1)
    progress = FlattenProgress(reporter, CopyStats(bytes_total=OBJECT), [0],  # type: ignore[arg-type]
                               OBJECT)
    assert progress(1, 10) == 0
    assert progress(2, 10) == -1
    assert progress(3, 10) == -1  # stays stopped
    with pytest.raises(JobCancelled):
        progress.raise_stop()
