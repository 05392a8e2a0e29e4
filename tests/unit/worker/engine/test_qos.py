from __future__ import annotations

import pytest

from worker.engine.qos import BURST_SECONDS, Pacer


class FakeClock:
    """Time that moves only when the pacer sleeps (or the test says so): pacing is exact."""

    def __init__(self) -> None:
        self.now = 0.0
        self.on_sleep: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.on_sleep.append(seconds)
        self.now += seconds


def test_paces_bytes_to_the_rate() -> None:
    clock = FakeClock()
    pacer = Pacer(100.0, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        pacer.take(40)  # 4000 bytes at 100/s
    assert clock.now == pytest.approx(4000 / 100)


def test_paces_operations_to_the_rate() -> None:
    clock = FakeClock()
    pacer = Pacer(ops_per_second=20.0, clock=clock, sleep=clock.sleep)
    for _ in range(200):
        pacer.take(1 << 22)
    assert clock.now == pytest.approx(200 / 20)


def test_the_tighter_of_both_limits_wins() -> None:
    clock = FakeClock()
    pacer = Pacer(1000.0, 5.0, clock=clock, sleep=clock.sleep)
    for _ in range(50):
        pacer.take(10)  # 500 bytes (0.5 s at 1000/s) but 50 ops (10 s at 5/s)
    assert clock.now == pytest.approx(10.0)


def test_idle_time_saves_up_only_a_short_burst() -> None:
    clock = FakeClock()
    pacer = Pacer(100.0, clock=clock, sleep=clock.sleep)
    clock.now += 1000
    assert pacer.take(100 * BURST_SECONDS) == 0.0
    assert pacer.take(100) == pytest.approx(1.0)


def test_a_lowered_limit_applies_during_a_long_wait() -> None:
    clock = FakeClock()
    pacer = Pacer(100.0, clock=clock, sleep=clock.sleep)
    lowered = False

    def sleep(seconds: float) -> None:
        nonlocal lowered
        clock.sleep(seconds)
        if clock.now >= 1.0 and not lowered:
            pacer.set_limits(10.0, None)  # an operator lowers it 1 s into a 10 s debt
            lowered = True

    pacer._sleep = sleep
    pacer.take(1000)
    # 1 s paid 100 bytes at the old rate; the other 900 take 90 s at the new one.
    assert clock.now == pytest.approx(91.0, abs=0.1)
    assert max(clock.on_sleep) <= 0.05 + 1e-9


def test_removing_the_limit_ends_the_wait() -> None:
    clock = FakeClock()
    pacer = Pacer(10.0, clock=clock, sleep=clock.sleep)
    pacer.take(10)
    pacer.set_limits(None, None)
    assert not pacer.limited
    assert pacer.take(10**9) == 0.0


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Pacer(0)
    with pytest.raises(ValueError, match="positive"):
        Pacer(None, -1)
