"""Where a copy stopped now would resume: its checkpoint. A copy submits its chunks in index
order and they finish in any order, a window of them in flight; the mark is the index of
the first chunk not yet finished, so every chunk before it is written whatever was in
flight when the worker died. The copy engine (a backup's checkpoint, a restore's mark in
the image it writes) and an object target's download move it the same way.

The mark alone makes a retry redo every chunk past it that finished out of order. A
download, with many chunks in flight, also keeps those (`beyond`): it starts no chunk more
than a span past the mark, so they are few, and its checkpoint stays small."""

from __future__ import annotations

from collections.abc import Callable


class ResumeMark:
    """Over `count` chunks submitted in order, the chunk at position p having index
    `index_at(p)` (increasing): `index` is where a resumed copy starts. Not thread-safe:
    the caller serializes `done`."""

    def __init__(self, count: int, index_at: Callable[[int], int]) -> None:
        self._count = count
        self._index_at = index_at
        self._done = bytearray(count)
        self._low = 0  # position of the first chunk not done
        self.index = index_at(0) if count else 0

    @property
    def position(self) -> int:
        """The position of the first chunk not done (`count` once every one is)."""
        return self._low

    def done(self, position: int) -> int:
        """The chunk at `position` is written; returns the mark (past the last chunk once
        every one is)."""
        self._done[position] = 1
        while self._low < self._count and self._done[self._low]:
            self._low += 1
        self.index = (self._index_at(self._low) if self._low < self._count
                      else self._index_at(self._count - 1) + 1)
        return self.index

    def beyond(self, until: int) -> list[int]:
        """The indexes of the chunks done past the mark, in order, among the positions
        before `until` (the first position not yet submitted: nothing after it is done)."""
        return [self._index_at(p) for p in range(self._low, min(until, self._count))
                if self._done[p]]
