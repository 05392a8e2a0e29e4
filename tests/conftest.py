"""For every tier: a test blocked where pytest-timeout cannot reach it ends the process that
runs it, named, instead of hanging the run (tests/support/watchdog.py)."""

from tests.support.watchdog import pytest_configure

__all__ = ["pytest_configure"]
