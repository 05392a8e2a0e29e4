"""Progress bars on stderr: `--wait` follows a job to its end; a download counts its
bytes as they arrive."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from cairnclient.client import Client

DONE = ("succeeded", "failed", "cancelled", "skipped")
WIDTH = 30


def wait(client: Client, job_id: str, *, interval: float = 0.5, timeout: float = 24 * 3600,
         bar: bool = True) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = client.jobs.get(job_id)
    while job["status"] not in DONE and time.monotonic() < deadline:
        if bar:
            _draw(job)
        time.sleep(interval)
        job = client.jobs.get(job_id)
    if bar:
        _draw(job)
        sys.stderr.write("\n")
        sys.stderr.flush()
    return job


def _draw(job: dict[str, Any]) -> None:
    progress = job.get("progress") or {}
    percent = progress.get("percent")
    if job["status"] == "succeeded":
        percent = 100.0
    filled = int(WIDTH * (percent or 0) / 100)
    rate = progress.get("rate_bytes_per_second", progress.get("throughput_bytes_per_second"))
    speed = f" {rate / 2**20:7.1f} MiB/s" if rate else ""
    shown = f"{percent:5.1f}%" if percent is not None else "  ...%"
    sys.stderr.write(f"\r{job['kind']} {job['id'][:8]} [{'#' * filled}{'.' * (WIDTH - filled)}]"
                     f" {shown}{speed} {job['status']:<10}")
    sys.stderr.flush()


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
