from __future__ import annotations

import pytest

from services.jobs.load import Load, job_load


def _load(copy_seconds: float = 10.0, window: int = 16, **seconds: float) -> Load | None:
    times = {"read_seconds": 0.0, "write_seconds": 0.0, "qos_wait_seconds": 0.0,
             "engine_seconds": 0.0, **seconds}
    return job_load(copy_seconds=copy_seconds, window=window, cores=2, **times)


def test_a_slow_source_is_named() -> None:
    load = _load(read_seconds=150.0, write_seconds=40.0, engine_seconds=1.0)
    assert load is not None
    assert load.source == pytest.approx(150 / 160)
    assert load.bottleneck == "source"


def test_a_slow_target_is_named() -> None:
    load = _load(read_seconds=30.0, write_seconds=140.0)
    assert load is not None
    assert load.bottleneck == "target"


def test_a_job_sleeping_on_its_limit_is_qos_bound() -> None:
    load = _load(read_seconds=20.0, write_seconds=30.0, qos_wait_seconds=8.0)
    assert load is not None
    assert load.bottleneck == "qos"


def test_cpu_work_is_measured_against_the_cores() -> None:
    load = _load(read_seconds=10.0, write_seconds=10.0, engine_seconds=18.0)
    assert load is not None
    assert load.engine == pytest.approx(0.9)
    assert load.bottleneck == "engine"


def test_nothing_to_say_before_the_copy_ran() -> None:
    assert _load(copy_seconds=0.0) is None
    assert _load(window=0) is None
