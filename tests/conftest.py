"""For every tier: a test blocked where pytest-timeout cannot reach it ends the process that
runs it, named, instead of hanging the run (tests/support/watchdog.py). And once per run
that reaches the integration tier, before any test: the stack's servers are up and its
clusters can take the tests' data (tests/support/preflight.py)."""

from __future__ import annotations

import pytest

from tests.support import preflight
from tests.support.watchdog import pytest_configure

__all__ = ["pytest_configure", "pytest_sessionstart"]


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    # Under pytest-xdist the controller checks, once; its workers need not.
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    if not preflight.wanted(config.args, config.invocation_params.dir, config.rootpath):
        return
    from tests.support.stack import PG_PORT, REDIS_PORT

    problem = preflight.problems(REDIS_PORT, PG_PORT)
    if problem is not None:
        pytest.exit(problem, returncode=3)
