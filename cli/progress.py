"""Progress bars on stderr: `--wait` follows a job to its end (`cairnclient.waiting`, which
the `openstack` plugin shares); a download counts its bytes as they arrive."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from cairnclient.waiting import wait

__all__ = ["Transfer", "wait"]

WIDTH = 30


class Transfer:
    """A download's bar: the share of `total` when the size is known (a file's
    Content-Length), else the bytes so far (an archive streamed as it is made); the rate
    beside it. Redrawn at most every `every` seconds, so a fast link spends its time on
    the bytes, not on the terminal."""

    def __init__(self, label: str, total: int | None, *, out: TextIO | None = None,
                 every: float = 0.1, clock: Any = time.monotonic) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self._out = out or sys.stderr
        self._every = every
        self._clock = clock
        self._start = clock()
        self._drawn = float("-inf")

    def add(self, count: int) -> None:
        self.done += count
        now = self._clock()
        if now - self._drawn >= self._every:
            self._drawn = now
            self._draw(now)

    def finish(self) -> None:
        self._draw(self._clock())
        self._out.write("\n")
        self._out.flush()

    def line(self, now: float) -> str:
        elapsed = now - self._start
        rate = f" {self.done / elapsed / 2**20:7.1f} MiB/s" if elapsed > 0 else ""
        size = f"{self.done / 2**20:9.1f} MiB"
        if not self.total:
            return f"{self.label} {size}{rate}"
        share = min(self.done / self.total, 1.0)
        filled = int(WIDTH * share)
        return (f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {share * 100:5.1f}%"
                f" {size}{rate}")

    def _draw(self, now: float) -> None:
        self._out.write("\r" + self.line(now))
        self._out.flush()
