"""A restore's (and a verify's) way through a chunk target: many chunks fetched at once,
opened on a few threads, written through the copy engine's window.

Three stages, each a pool of threads of its own size:
- fetch (`Limits.fetches`): one request per chunk, I/O only. What keeps a store busy over
  a round trip is requests in flight, not threads doing work, so there are many.
- open (`Limits.opens`, the cores): authenticate, decrypt, decompress and check the name.
  CPU only; more threads than cores would only queue, and a fetch thread never waits on it.
- write (`Limits.writes`, the copy engine's window; none for a verify): librbd writes.

Chunks are started in plan order and finish in any order. The caller's thread alone starts
them, hands each from stage to stage, paces them (the job's QoS, before each fetch, as the
copy engine paces before each read), keeps the resume mark and the figures, and reports
progress: none of that needs a lock.

Two bounds:
- held: a chunk is held from the start of its fetch until it is written (checked, for a
  verify): at most `Limits.held` at once, so a slow destination stops the fetches rather
  than filling memory (`Limits.held_bytes`).
- span: no chunk is started `Limits.span` positions or more past the first one not done,
  so one slow fetch stalls the rest after a bounded run, and the chunks done past the
  mark, which the checkpoint records (`CopyStats.resume_done`), are fewer than the span."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol, TypeVar

from services.errors import DataCorrupt
from worker.engine.chunks import SEALING_OVERHEAD
from worker.engine.copy import CopyStats
from worker.engine.resume import ResumeMark

SPAN_PER_HELD = 4
"""The span in chunks held at most: a fetch may take four windows' time longer than the
others before the ones behind it stop starting."""

T = TypeVar("T")


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Limits:
    fetches: int
    opens: int
    writes: int = 0
    """0: nothing is written (a verify)."""

    def __post_init__(self) -> None:
        if self.fetches < 1 or self.opens < 1 or self.writes < 0:
            raise ValueError(f"a fetch window needs fetches and opens: {self}")

    @property
    def held(self) -> int:
        """Chunks fetched or being fetched and not yet written, at most: every stage busy."""
        return self.fetches + self.opens + self.writes

    @property
    def span(self) -> int:
        return SPAN_PER_HELD * self.held

    def held_bytes(self, chunk_size: int) -> int:
        """The most chunk data in memory at once: each chunk held as a sealed blob of at
        most `chunk_size` + SEALING_OVERHEAD bytes, then as plaintext of at most
        `chunk_size`, and both at once while it is opened."""
        return self.held * (chunk_size + SEALING_OVERHEAD) + self.opens * chunk_size


class Stages(Protocol):
    """What is done to the chunk at a position of the plan, on the stage's threads."""

    def fetch(self, position: int) -> bytes | bytearray | None:
        """The sealed chunk (None: missing; `open` says so)."""

    def open(self, position: int, blob: bytes | bytearray | None) -> bytes:
        """The checked plaintext; DataCorrupt naming the chunk's offset otherwise."""

    def write(self, position: int, data: bytes | None) -> None:
        """Write it (None: a chunk not fetched, a hole to clear)."""


_FETCH, _OPEN, _WRITE = 0, 1, 2


def _timed(work: Callable[..., T], *args: object) -> tuple[T, float]:
    t0 = time.monotonic()
    return work(*args), time.monotonic() - t0


class FetchWindow:
    """One run over the chunks at `indexes` (increasing) of a plan. `fetched(position)`:
    False for a chunk that is only written (a hole). `pace(position)`: waits as long as the
    job's QoS asks before the chunk starts, returning the seconds waited. `on_done`:
    called with each chunk's position once it is written, or checked when nothing is.
    `on_corrupt`: given, a chunk that fails its check is handed to it (and counts as done)
    instead of failing the run. `earlier`: indexes an earlier attempt did past its mark,
    not in the plan, kept in `CopyStats.resume_done` while they are past the new one."""

    def __init__(self, indexes: Sequence[int], stages: Stages, limits: Limits,
                 stats: CopyStats, *, fetched: Callable[[int], bool],
                 pace: Callable[[int], float] | None = None,
                 on_done: Callable[[int], None] | None = None,
                 on_corrupt: Callable[[int, DataCorrupt], None] | None = None,
                 earlier: Collection[int] = ()) -> None:
        self.indexes = indexes
        self.stages = stages
        self.limits = limits
        self.stats = stats
        self.fetched = fetched
        self.pace = pace
        self.on_done = on_done
        self.on_corrupt = on_corrupt
        self.earlier = sorted(earlier)
        self.mark = ResumeMark(len(indexes), indexes.__getitem__)
        self.started = 0
        """Positions before this one are started."""
        self.fetching = 0
        self.held = 0
        self.most_held = 0
        self._pending: dict[Future[tuple[object, float]], tuple[int, int]] = {}
        self._pools: tuple[ThreadPoolExecutor, ...] = ()
        self._checkpoint()

    def run(self, tick: Callable[[], None] | None = None) -> None:
        """Move every chunk through; `tick` is called after chunks finish (raising stops
        the run: a cancel). Raises the first failure, after cancelling what has not
        started and waiting for what has."""
        limits = self.limits
        self._pools = tuple(ThreadPoolExecutor(max_workers=max(size, 1), thread_name_prefix=name)
                            for size, name in ((limits.fetches, "fetch"),
                                               (limits.opens, "open"),
                                               (limits.writes, "write")))
        try:
            while True:
                self._reap(block=False, tick=tick)
                if self._may_start():
                    self._start()
                elif self._pending:
                    self._reap(block=True, tick=tick)
                else:
                    break
        finally:
            for pool in self._pools:
                pool.shutdown(wait=True, cancel_futures=True)

    def _may_start(self) -> bool:
        if self.started >= len(self.indexes) or self.held >= self.limits.held \
                or self.started >= self.mark.position + self.limits.span:
            return False
        return self.fetching < self.limits.fetches or not self.fetched(self.started)

    def _start(self) -> None:
        position = self.started
        self.started += 1
        if self.pace is not None:
            self.stats.qos_wait_seconds += self.pace(position)
        self.held += 1
        self.most_held = max(self.most_held, self.held)
        if self.fetched(position):
            self.fetching += 1
            self._submit(_FETCH, position, self.stages.fetch, position)
        else:
            self._submit(_WRITE, position, self.stages.write, position, None)

    def _submit(self, stage: int, position: int, work: Callable[..., object],
                *args: object) -> None:
        self._pending[self._pools[stage].submit(_timed, work, *args)] = (stage, position)

    def _reap(self, *, block: bool, tick: Callable[[], None] | None) -> None:
        finished = [f for f in self._pending if f.done()]
        if not finished:
            if not block:
                return
            finished = list(wait(self._pending, return_when=FIRST_COMPLETED)[0])
        for future in finished:
            stage, position = self._pending.pop(future)
            self._advance(stage, position, future)
        self._checkpoint()
        if tick is not None:
            tick()

    def _advance(self, stage: int, position: int,
                 future: Future[tuple[object, float]]) -> None:
        if stage == _FETCH:
            self.fetching -= 1
        try:
            value, seconds = future.result()
        except DataCorrupt as exc:
            if self.on_corrupt is None:
                raise
            self.on_corrupt(position, exc)
            self._finish(position)
            return
        stats = self.stats
        if stage == _FETCH:
            stats.read_seconds += seconds
            self._submit(_OPEN, position, self.stages.open, position, value)
        elif stage == _OPEN:
            stats.engine_seconds += seconds
            if self.limits.writes:
                self._submit(_WRITE, position, self.stages.write, position, value)
            else:
                self._finish(position)
        else:
            stats.write_seconds += seconds
            self._finish(position)

    def _finish(self, position: int) -> None:
        self.held -= 1
        self.mark.done(position)
        if self.on_done is not None:
            self.on_done(position)

    def _checkpoint(self) -> None:
        """The mark, and the chunks done past it (this run's and the earlier attempt's):
        fewer than the span from this run; the earlier ones are kept up to the same
        number (leaving some out only costs their fetch again)."""
        index = self.mark.index
        done = sorted({*self.mark.beyond(self.started),
                       *(i for i in self.earlier if i > index)})
        self.stats.resume_index = index
        self.stats.resume_done = tuple(done[:self.limits.span])
