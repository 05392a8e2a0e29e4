"""Per-job pacing: a token bucket that the copy's submit loop draws from before each read."""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """`rate` tokens a second with at most `burst` saved up. `take(n)` may drive the balance
    below zero and then sleeps until it is paid back, so large requests are paced exactly
    rather than refused."""

    def __init__(self, rate: float, burst: float, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = burst
        self._last = clock()

    def take(self, amount: float) -> float:
        """Take `amount` tokens, sleeping as long as needed; returns the seconds slept."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= amount
        if self._tokens >= 0:
            return 0.0
        wait = -self._tokens / self.rate
        self._sleep(wait)
        return wait
