from __future__ import annotations

import pytest

from worker.engine.qos import TokenBucket


class FakeClock:
    """Time that moves only when the bucket sleeps: pacing is checked exactly."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_paces_to_the_rate_over_many_takes() -> None:
    clock = FakeClock()
    bucket = TokenBucket(100.0, burst=25.0, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        bucket.take(40)  # 4000 tokens at 100/s
    # The burst is spent at once; the rest takes exactly (4000 - 25) / 100 s.
    assert clock.now == pytest.approx((4000 - 25) / 100)


def test_take_within_burst_does_not_wait() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, burst=10.0, clock=clock, sleep=clock.sleep)
    assert bucket.take(10) == 0.0
    assert bucket.take(5) == pytest.approx(0.5)


def test_refills_no_more_than_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, burst=10.0, clock=clock, sleep=clock.sleep)
    bucket.take(10)
    clock.now += 100  # idle for long: saves up only `burst`
    assert bucket.take(10) == 0.0
    assert bucket.take(10) == pytest.approx(1.0)


def test_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        TokenBucket(0, burst=1)
