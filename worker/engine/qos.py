"""Per-job pacing: token buckets for bytes/s and operations/s that the copy's submit loop
draws from before each read. Limits can change while a job runs (an operator lowers them
through the API); the pacer sleeps in short slices and re-reads its rates, so a change takes
effect within a slice, not after a long sleep computed at the old rate.

Pacing lives in Cairn, not in librbd's QoS: librbd's limits are per image handle, and set
on a tenant's volume they would throttle the tenant's VM too."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

SLICE_SECONDS = 0.05
"""Longest single sleep: bounds how late a changed limit is noticed."""

BURST_SECONDS = 0.1
"""Tokens saved up while idle, in seconds of the rate: keeps 1 s windows within ~10 %."""


@dataclass
class _Bucket:
    rate: float
    tokens: float = 0.0

    def refill(self, elapsed: float) -> None:
        self.tokens = min(self.rate * BURST_SECONDS, self.tokens + elapsed * self.rate)


class Pacer:
    """Holds a job to at most `bytes_per_second` and `ops_per_second` (either may be None:
    unlimited). `take` may drive a bucket below zero and then sleeps until it is paid back,
    so large requests are paced exactly rather than refused."""

    def __init__(self, bytes_per_second: float | None = None,
                 ops_per_second: float | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 interrupt: Callable[[], None] | None = None) -> None:
        self._clock = clock
        self._sleep = sleep
        self._interrupt = interrupt
        """Called between sleep slices; raising ends the wait. A job cancelled (or lost)
        while paced at 1 MiB/s over a large request stops within a slice, not when the
        debt is paid."""
        self._lock = threading.Lock()
        self._bytes: _Bucket | None = None
        self._ops: _Bucket | None = None
        self._last = clock()
        self.set_limits(bytes_per_second, ops_per_second)

    @property
    def limited(self) -> bool:
        return self._bytes is not None or self._ops is not None

    def limits(self) -> tuple[float | None, float | None]:
        with self._lock:
            return (self._bytes.rate if self._bytes else None,
                    self._ops.rate if self._ops else None)

    def set_limits(self, bytes_per_second: float | None, ops_per_second: float | None) -> None:
        for value in (bytes_per_second, ops_per_second):
            if value is not None and value <= 0:
                raise ValueError("a QoS limit must be positive (or None for no limit)")
        with self._lock:
            self._refill()
            self._bytes = _retarget(self._bytes, bytes_per_second)
            self._ops = _retarget(self._ops, ops_per_second)

    def take(self, nbytes: int, nops: int = 1) -> float:
        """Draw `nbytes` and `nops`, sleeping as long as the limits require; returns the
        seconds slept."""
        with self._lock:
            self._refill()
            if self._bytes is not None:
                self._bytes.tokens -= nbytes
            if self._ops is not None:
                self._ops.tokens -= nops
        waited = 0.0
        while True:
            if self._interrupt is not None:
                self._interrupt()
            with self._lock:
                self._refill()
                debt = max((-b.tokens / b.rate for b in (self._bytes, self._ops)
                            if b is not None and b.tokens < 0), default=0.0)
            if debt <= 1e-9:  # below the clock's resolution: paid
                return waited
            pause = min(debt, SLICE_SECONDS)
            self._sleep(pause)
            waited += pause

    def _refill(self) -> None:
        now = self._clock()
        elapsed, self._last = now - self._last, now
        for bucket in (self._bytes, self._ops):
            if bucket is not None:
                bucket.refill(elapsed)


def _retarget(bucket: _Bucket | None, rate: float | None) -> _Bucket | None:
    """A changed rate keeps the bucket's debt (what was taken is still paid for); a removed
    limit drops it."""
    if rate is None:
        return None
    if bucket is None:
        return _Bucket(rate)
    bucket.rate = rate
    bucket.tokens = min(bucket.tokens, rate * BURST_SECONDS)
    return bucket
