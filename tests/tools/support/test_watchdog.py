"""The suite's watchdog (tests/support/watchdog.py) ends a test blocked inside C, where
pytest-timeout's signal never lands, and names it; under pytest-xdist the run goes on
with a new worker. Shown on a real deadlock in C (a pthread mutex locked twice), once
with the GIL let go (as python-rbd waits on a stalled OSD) and once with it held."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

BLOCKED = '''
import ctypes
import time

import pytest


def _deadlock(library):
    mutex = ctypes.create_string_buffer(64)  # PTHREAD_MUTEX_INITIALIZER is all zeros
    library.pthread_mutex_lock(mutex)
    library.pthread_mutex_lock(mutex)  # waits forever, and no signal ends the wait


@pytest.mark.timeout(1)
def test_blocked_in_c_without_the_gil():
    _deadlock(ctypes.CDLL(None))


@pytest.mark.timeout(1)
def test_blocked_in_c_holding_the_gil():
    _deadlock(ctypes.PyDLL(None))


@pytest.mark.parametrize("n", range(12))
def test_quick(n):
    time.sleep(0.1)
'''

LEAN = ("-p", "no:schemathesis", "-p", "no:hypothesispytest", "-p", "no:anyio")
"""Plugins the blocked tests do not need: each xdist worker starts faster without them."""


def _suite_distribution() -> str:
    """How `make test` hands out the integration tests (deploy/local/test.sh)."""
    script = (REPO / "deploy" / "local" / "test.sh").read_text()
    found = re.search(r"^XDIST_DIST=(\w+)$", script, re.MULTILINE)
    assert found is not None, "deploy/local/test.sh no longer sets XDIST_DIST"
    return found.group(1)


def test_blocked_tests_are_ended_named_and_the_run_goes_on(tmp_path: Path) -> None:
    # Under the suite's distribution: the process each blocked test ends is an xdist
    # worker, which xdist replaces, and the rest still run. (pytest-xdist's loadgroup
    # queued a dead worker's finished tests again and then waited for them until CI's
    # limit.) Without xdist the run would end at the first, with the same report.
    (tmp_path / "test_blocked.py").write_text(BLOCKED)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CAIRN_TEST_WATCHDOG_GRACE": "0.5",
           "CAIRN_TEST_WATCHDOG_LAST_RESORT": "1",
           "CAIRN_TEST_WATCHDOG_ENDED": str(tmp_path / "ended")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *LEAN, "-p",
         "tests.support.watchdog", "-q", "--rootdir", str(tmp_path), "-n", "2", "--dist",
         _suite_distribution(), str(tmp_path / "test_blocked.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    took = time.monotonic() - started
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert took < 60, took
    assert "cairn test watchdog: test_blocked.py::test_blocked_in_c_without_the_gil still " \
           "runs" in out, out
    assert "in _deadlock" in out, out  # every thread's stack, the blocked one's included
    for test in ("test_blocked_in_c_without_the_gil", "test_blocked_in_c_holding_the_gil"):
        assert f"crashed while running 'test_blocked.py::{test}'" in out, out
    assert "2 failed, 12 passed" in out, out
    # What `make test` must not run again as if an abort had failed it (only the Python
    # watchdog can write it down: the last resort ends a process holding the GIL).
    assert (tmp_path / "ended").read_text().split() == [
        "test_blocked.py::test_blocked_in_c_without_the_gil"]
