"""The suite's last resort against a hang: a test still running `GRACE` seconds after its
timeout is ended with the process that runs it, after every thread's stack is written
out under the test's name.

pytest-timeout's `signal` method fails a slow test the ordinary way, but only once the
main thread is back in Python: a test blocked inside C (librbd waiting on a stalled OSD,
a lock in a C library) never gets there, and the run used to hang until CI's limit. Two
watchdogs take over from it, neither of which needs the main thread:

- a Python thread (the common case: python-rbd, python-rados and ctypes let go of the
  GIL while they wait), which names the test, dumps every thread's stack and ends the
  process;
- faulthandler's own C thread, `LAST_RESORT` seconds later, for code that waits while
  holding the GIL: it dumps the stacks (the test is in them) and ends the process.

Under pytest-xdist the ended process is one worker: xdist reports the test as failed
("worker crashed while running ...") and starts a new worker for the tests that remain
(with `--dist load`; deploy/local/test.sh says why not `loadgroup`). Without xdist the
run ends there, with the test named and exit status 1.

Every pytest process also writes every thread's stack on SIGUSR1: `make test` sends it to
a tier that outlives its limit, hung where no test's watchdog looks (the xdist
controller, a fixture between tests), before it ends the tier."""

from __future__ import annotations

import faulthandler
import os
import signal
import threading
import time

import pytest

GRACE = float(os.environ.get("CAIRN_TEST_WATCHDOG_GRACE", "30"))
"""Seconds past the test's timeout before the watchdog acts: pytest-timeout's signal gets
the first chance, which keeps the run going when the test is in Python."""
LAST_RESORT = float(os.environ.get("CAIRN_TEST_WATCHDOG_LAST_RESORT", "10"))
"""Seconds after the Python watchdog that faulthandler's C thread acts."""
EXIT_STATUS = 1
ENDED_FILE = os.environ.get("CAIRN_TEST_WATCHDOG_ENDED")
"""Where the watchdog appends the id of each test it ends: `make test` runs again a test
whose process died of an abort, never one that hung (tests/support/reruns.py)."""


def _timeout_of(item: pytest.Item) -> float:
    """The test's timeout as pytest-timeout sees it (its mark, --timeout, or the ini)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0] or 0)
    if marker is not None and "timeout" in marker.kwargs:
        return float(marker.kwargs["timeout"] or 0)
    configured = getattr(item.config, "_env_timeout", None)  # set by pytest-timeout
    if configured is None:
        configured = item.config.getini("timeout") or 0
    return float(configured)


class Watchdog:
    def __init__(self) -> None:
        # Between tests pytest captures nothing: fd 2 is the run's real stderr here, and a
        # copy of it stays valid while a test's output is captured.
        self._out = os.dup(2)
        faulthandler.register(signal.SIGUSR1, file=self._out, all_threads=True)
        self._lock = threading.Condition()
        self._nodeid: str | None = None
        self._deadline = 0.0
        self._limit = 0.0
        threading.Thread(target=self._watch, name="cairn-test-watchdog", daemon=True).start()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item):  # type: ignore[no-untyped-def]
        limit = _timeout_of(item)
        if limit > 0:
            self._arm(item.nodeid, limit)
        try:
            yield
        finally:
            if limit > 0:
                self._disarm()

    def _arm(self, nodeid: str, limit: float) -> None:
        with self._lock:
            self._nodeid, self._limit = nodeid, limit
            self._deadline = time.monotonic() + limit + GRACE
            self._lock.notify()
        faulthandler.dump_traceback_later(limit + GRACE + LAST_RESORT, exit=True,
                                          file=self._out)

    def _disarm(self) -> None:
        faulthandler.cancel_dump_traceback_later()
        with self._lock:
            self._nodeid = None
            self._lock.notify()

    def _watch(self) -> None:
        while True:
            with self._lock:
                while self._nodeid is None or time.monotonic() < self._deadline:
                    wait = None if self._nodeid is None else self._deadline - time.monotonic()
                    self._lock.wait(wait)
                nodeid, limit = self._nodeid, self._limit
            self._end(nodeid, limit)

    def _end(self, nodeid: str, limit: float) -> None:
        message = (f"\n\ncairn test watchdog: {nodeid} still runs {limit + GRACE:.0f} s after "
                   f"it started (its timeout is {limit:.0f} s); it is blocked where "
                   "pytest-timeout's signal cannot reach it (inside C?). Every thread's "
                   "stack follows; this process ends now.\n\n")
        try:
            if ENDED_FILE:
                with open(ENDED_FILE, "a") as ended:
                    ended.write(f"{nodeid}\n")
            os.write(self._out, message.encode())
            faulthandler.dump_traceback(file=self._out, all_threads=True)
            os.write(self._out, f"\ncairn test watchdog: ended {nodeid}\n".encode())
        finally:
            os._exit(EXIT_STATUS)


def pytest_configure(config: pytest.Config) -> None:
    """As a plugin (`-p tests.support.watchdog`, or tests/conftest.py for the suite)."""
    if not config.pluginmanager.has_plugin("cairn-test-watchdog"):
        config.pluginmanager.register(Watchdog(), "cairn-test-watchdog")
