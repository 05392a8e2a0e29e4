"""Waiting on cairn-scheduler's rounds. A test that shows that something does not happen
(no second job for a slot, no second delivery, a restore point that stays `creating` while
no worker runs) waits until the scheduler has had that many chances, counted on its
/metrics (`cairn_scheduler_tick_seconds_count`), instead of sleeping a fixed time that a
loaded machine may not fill with rounds."""

from __future__ import annotations

import time
from collections.abc import Mapping

import httpx

ROUNDS = "cairn_scheduler_tick_seconds_count"


def metrics_port(env: Mapping[str, str]) -> int:
    """The scheduler's metrics port in a Cairn's environment (tests/support/stack.py)."""
    return int(env["CAIRN_SCHEDULER_METRICS_PORT"])


def rounds(port: int) -> int:
    """Rounds the scheduler serving metrics on `port` has finished."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith(ROUNDS + " "):
            return int(float(line.split()[1]))
    return 0


def wait_rounds(port: int, count: int = 3, timeout: float = 30) -> None:
    """Until the scheduler has finished `count` more rounds from now."""
    until_rounds(port, rounds(port) + count, timeout)


def until_rounds(port: int, total: int, timeout: float = 30) -> None:
    """Until the scheduler has finished `total` rounds since it started."""
    deadline = time.monotonic() + timeout
    while rounds(port) < total:
        assert time.monotonic() < deadline, \
            f"the scheduler on port {port} did not reach round {total} in {timeout} s"
        time.sleep(0.05)
