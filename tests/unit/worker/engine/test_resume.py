"""Where a copy stopped now resumes: the first chunk not yet written, whatever order the
chunks in flight finished in."""

from __future__ import annotations

from worker.engine.resume import ResumeMark


def test_the_mark_waits_for_the_first_chunk_still_in_flight() -> None:
    indexes = [3, 4, 7, 9]  # a plan's objects: holes are not in it
    mark = ResumeMark(len(indexes), indexes.__getitem__)
    assert mark.index == 3
    assert mark.done(1) == 3  # 4 is written, 3 still in flight: a retry redoes both
    assert mark.done(2) == 3
    assert mark.done(0) == 9  # 3, 4 and 7 are written
    assert mark.done(3) == 10  # past the last: nothing left to redo


def test_an_empty_plan_resumes_at_the_start() -> None:
    assert ResumeMark(0, [].__getitem__).index == 0


def test_the_chunks_done_past_the_mark_are_known() -> None:
    indexes = [3, 4, 7, 9, 12]
    mark = ResumeMark(len(indexes), indexes.__getitem__)
    mark.done(2)
    mark.done(3)
    assert (mark.index, mark.position, mark.beyond(5)) == (3, 0, [7, 9])
    assert mark.beyond(3) == [7]  # nothing at or after the first position not submitted
    mark.done(0)
    assert (mark.index, mark.position, mark.beyond(5)) == (4, 1, [7, 9])
    mark.done(1)
    assert (mark.index, mark.position, mark.beyond(5)) == (12, 4, [])
